#!/bin/bash
# Join the shards grade-array.sh wrote into one gradebook (python -m grader grade-class
# merge): the folder a single run would have written. Submit it after the array job:
#
#   sbatch --dependency=afterok:$JOB grader/grade_class/slurm/merge.sh shards graded --format canvas
#SBATCH --job-name=grade-class-merge
#SBATCH --cpus-per-task=1
#SBATCH --mem=4G
#SBATCH --time=00:30:00
#SBATCH --output=grade-class-merge-%j.log
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: sbatch merge.sh SHARDS OUT [merge flags: --format canvas ...]" >&2
  exit 2
fi
HERE="${SLURM_SUBMIT_DIR:-$PWD}"
KIT="${HERO_TRANSFORMER_KIT:-$HERE}"
cd "$HERE"
SHARDS="$(realpath -m -- "$1")"
OUT="$(realpath -m -- "$2")"
shift 2
cd "$KIT"
exec "${HERO_TRANSFORMER_PYTHON:-$KIT/.venv/bin/python}" -m grader grade-class merge "$SHARDS"/* --out "$OUT" "$@"
