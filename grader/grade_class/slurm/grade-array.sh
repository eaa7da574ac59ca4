#!/bin/bash
# Grade a class on a Slurm cluster, one array task per shard (python -m grader grade-class
# --shard K/N): every task reads the same INPUT with the same flags and --seed, and task K
# of N writes SHARDS/K. Submit it from the kit's folder (or set HERO_TRANSFORMER_KIT):
#
#   JOB=$(sbatch --parsable --array=1-8 grader/grade_class/slurm/grade-array.sh \
#         submissions.zip shards --seed 4242 --roster roster.csv)
#   sbatch --dependency=afterok:$JOB grader/grade_class/slurm/merge.sh shards graded --format canvas
#
# INPUT and SHARDS are read relative to the folder sbatch was run in. A task that failed
# can be run again (sbatch --array=K-K ...): it grades only what it has not finished.
#SBATCH --job-name=grade-class
#SBATCH --array=1-8
#SBATCH --cpus-per-task=2
#SBATCH --mem=8G
#SBATCH --time=01:00:00
#SBATCH --output=grade-class-%A_%a.log
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: sbatch --array=1-N grade-array.sh INPUT SHARDS --seed S [grade-class flags...]" >&2
  exit 2
fi
case " $* " in
  *" --seed "* | *" --seed="*) ;;
  *) echo "grade-array.sh: give every shard the same --seed (the hidden checks draw their inputs from it)" >&2
     exit 2 ;;
esac
HERE="${SLURM_SUBMIT_DIR:-$PWD}"
KIT="${HERO_TRANSFORMER_KIT:-$HERE}"
cd "$HERE"
INPUT="$(realpath -m -- "$1")"
SHARDS="$(realpath -m -- "$2")"
shift 2
N="${SLURM_ARRAY_TASK_COUNT:?submit this as an array job: sbatch --array=1-N grade-array.sh ...}"
K=$(( SLURM_ARRAY_TASK_ID - ${SLURM_ARRAY_TASK_MIN:-1} + 1 ))
cd "$KIT"
exec "${HERO_TRANSFORMER_PYTHON:-$KIT/.venv/bin/python}" -m grader grade-class "$INPUT" \
  --shard "$K/$N" --out "$SHARDS/$K" "$@"
