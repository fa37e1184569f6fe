#!/bin/bash
# A toy trainer that keeps the training-command contract (docs/bring_your_own_training.md):
#   toy_train.sh --first-epoch N --last-epoch M --seed S --lr X --resume-from FILE|'' --write-to FILE
# Its "model" is one integer that each epoch updates from the seed and the learning rate; its
# checkpoint is the history of every epoch trained, one line each. Resuming checks that the
# previous chunk ended right before this one starts, so a chunk trained twice or skipped fails.
set -euo pipefail

while [ $# -gt 0 ]; do
    case "$1" in
        --first-epoch) first=$2 ;;
        --last-epoch) last=$2 ;;
        --seed) seed=$2 ;;
        --lr) lr=$2 ;;
        --resume-from) resume=$2 ;;
        --write-to) out=$2 ;;
        *) echo "toy_train.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift 2
done

state=$seed
if [ -n "$resume" ]; then
    read -r _ done_epoch _ _ _ state < <(tail -n 1 "$resume")
    if [ "$done_epoch" -ne $((first - 1)) ]; then
        echo "toy_train.sh: $resume ends at epoch $done_epoch, this chunk starts at $first" >&2
        exit 3
    fi
elif [ "$first" -ne 1 ]; then
    echo "toy_train.sh: epoch $first needs --resume-from" >&2
    exit 3
fi

mkdir -p "$(dirname "$out")"
{ [ -n "$resume" ] && cat "$resume"; true; } > "$out.partial"
for ((epoch = first; epoch <= last; epoch++)); do
    state=$(( (state * 1103515245 + 12345 + ${#lr}) % 2147483648 ))
    echo "epoch $epoch lr $lr state $state" >> "$out.partial"
    echo "trained epoch $epoch on $(hostname)" >&2
done
mv "$out.partial" "$out"
