#!/bin/bash
# Join the shards grade-array.sh wrote into one gradebook (python -m grader grade-class
# merge): the folder a single run would have written. Submit it after the array job has
# ended, however its tasks ended, from the same folder (its log: grade-class-merge-JOB.log):
#
#   sbatch --dependency=afterany:$JOB $HERO_TRANSFORMER_KIT/grader/grade_class/slurm/merge.sh shards graded
#
# It first checks that every shard 1-N finished; if one did not, it writes no gradebook,
# names the shards to run again and the sbatch line that does it, and exits 1.
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
if [ ! -f "$KIT/grader/__main__.py" ]; then
  echo "merge.sh: $KIT is not the kit's folder; export HERO_TRANSFORMER_KIT=/path/to/the/kit before sbatch" >&2
  exit 2
fi
cd "$HERE"
SHARDS="$(realpath -m -- "$1")"
OUT="$(realpath -m -- "$2")"
shift 2
cd "$KIT"
PYTHON="${HERO_TRANSFORMER_PYTHON:-$KIT/.venv/bin/python}"
"$PYTHON" -m grader.grade_class.shards "$SHARDS"
N="$(sed -n 's/^shards=//p' "$SHARDS/array")"
FOLDERS=()
for K in $(seq 1 "$N"); do FOLDERS+=("$SHARDS/$K"); done
exec "$PYTHON" -m grader grade-class merge "${FOLDERS[@]}" --out "$OUT" "$@"
