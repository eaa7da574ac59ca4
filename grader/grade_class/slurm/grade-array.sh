#!/bin/bash
# Grade a class on a Slurm cluster, one array task per shard (python -m grader grade-class
# --shard K/N): task K grades shard K of N into SHARDS/K, every task with the same INPUT,
# flags and --seed. Submit it from your grading folder (the one holding INPUT), with the
# kit named in HERO_TRANSFORMER_KIT; SHARDS and the logs (grade-class-JOB_K.log) land there:
#
#   export HERO_TRANSFORMER_KIT=/path/to/hero_transformer
#   JOB=$(sbatch --parsable --array=1-8 $HERO_TRANSFORMER_KIT/grader/grade_class/slurm/grade-array.sh \
#         submissions.zip shards --seed 4242 --roster roster.csv)
#   sbatch --dependency=afterany:$JOB $HERO_TRANSFORMER_KIT/grader/grade_class/slurm/merge.sh shards graded
#
# The task id is the shard: the array is 1-N, and the first tasks record N in SHARDS/array
# (a new split needs a new SHARDS folder). A task that failed is run again with the same
# command and the array narrowed to it (sbatch --array=K-K ...): it grades shard K of N,
# only what it has not finished.
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
if [ ! -f "$KIT/grader/__main__.py" ]; then
  echo "grade-array.sh: $KIT is not the kit's folder; export HERO_TRANSFORMER_KIT=/path/to/the/kit before sbatch" >&2
  exit 2
fi
cd "$HERE"
INPUT="$(realpath -m -- "$1")"
SHARDS="$(realpath -m -- "$2")"
shift 2
K="${SLURM_ARRAY_TASK_ID:?submit this as an array job: sbatch --array=1-N grade-array.sh ...}"
mkdir -p "$SHARDS"
if [ -f "$SHARDS/array" ]; then
  # A rerun of some tasks (--array=K-K, --array=2,5): the split the first run recorded.
  N="$(sed -n 's/^shards=//p' "$SHARDS/array")"
else
  if [ "${SLURM_ARRAY_TASK_MIN:-1}" != 1 ]; then
    echo "grade-array.sh: number the tasks from 1 (--array=1-N): task K grades shard K of N" >&2
    exit 2
  fi
  N="${SLURM_ARRAY_TASK_MAX:?submit this as an array job: sbatch --array=1-N grade-array.sh ...}"
  # Every first task writes the same lines; the last rename wins, whole.
  { echo "shards=$N"; printf 'arguments='; printf ' %q' "$INPUT" "$SHARDS" "$@"; echo; } > "$SHARDS/.array.$K"
  mv -f "$SHARDS/.array.$K" "$SHARDS/array"
fi
echo "grade-array.sh: shard $K of $N (the split recorded in $SHARDS/array)"
if [ "$K" -lt 1 ] || [ "$K" -gt "$N" ]; then
  echo "grade-array.sh: task $K is outside shards 1-$N of $SHARDS" >&2
  exit 2
fi
cd "$KIT"
exec "${HERO_TRANSFORMER_PYTHON:-$KIT/.venv/bin/python}" -m grader grade-class "$INPUT" \
  --shard "$K/$N" --out "$SHARDS/$K" "$@"
