#!/bin/bash
# Nightly conversion of a folder as a Slurm job array: every task walks the same folder and
# converts the inputs whose path hashes to its shard (SLURM_ARRAY_TASK_ID of
# SLURM_ARRAY_TASK_COUNT), so files that arrive while the array runs never shift another file.
#SBATCH --job-name=tet-nightly
#SBATCH --array=0-3
#SBATCH --cpus-per-task=2
#SBATCH --time=08:00:00
set -euo pipefail
: "${IN_DIR:?set IN_DIR}" "${OUT_DIR:?set OUT_DIR}" "${REPORT_DIR:?set REPORT_DIR}"
exec tet-convert "$IN_DIR" --out-dir "$OUT_DIR" \
    --keep-going --timeout 1800 --jobs "${SLURM_CPUS_PER_TASK:-1}" \
    --report "$REPORT_DIR/tet-$SLURM_ARRAY_JOB_ID-$SLURM_ARRAY_TASK_ID.jsonl"
