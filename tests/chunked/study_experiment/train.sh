#!/bin/bash
# train.sh EPOCH EPOCHS_PER_JOB RUN_UUID SEED ALPHA SITE: trains epochs EPOCH-EPOCHS_PER_JOB+1..EPOCH, resuming
# from output/RUN_UUID/history; the loss after each epoch is alpha / epoch, written to output/RUN_UUID/metrics.json.
set -euo pipefail
epoch=$1 per_job=$2 run=$3 seed=$4 alpha=$5 site=$6
mkdir -p "output/$run"
history="output/$run/history"
for ((e = epoch - per_job + 1; e <= epoch; e++)); do echo "epoch $e seed $seed alpha $alpha site $site" >> "$history"; done
[ "$(wc -l < "$history")" -eq "$epoch" ] || { echo "resume mismatch at epoch $epoch" >&2; exit 3; }
python3 -c "import json, sys; json.dump({'loss': $alpha / $epoch}, sys.stdout)" > "output/$run/metrics.json"
