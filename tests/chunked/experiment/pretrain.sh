#!/bin/bash
# pretrain.sh EPOCH EPOCHS_PER_JOB RUN_UUID SEED ALPHA OPTIMIZER: trains epochs EPOCH-EPOCHS_PER_JOB+1..EPOCH,
# resuming from output/RUN_UUID/history (transferred in from the previous chunk).
set -euo pipefail
epoch=$1 per_job=$2 run=$3 seed=$4 alpha=$5 optimizer=$6
first=$((epoch - per_job + 1))
mkdir -p "output/$run"
history="output/$run/history"
if [ "$first" -gt 1 ]; then
    last=$(tail -n 1 "$history" | cut -d' ' -f2)
    [ "$last" -eq $((first - 1)) ] || { echo "resume mismatch: $last then $first" >&2; exit 3; }
fi
for ((e = first; e <= epoch; e++)); do echo "epoch $e seed $seed alpha $alpha optimizer $optimizer" >> "$history"; done
