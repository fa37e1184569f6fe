"""pretrain.py --learning_rate=ALPHA: trains epochs EPOCH-EPOCHS_PER_JOB+1..EPOCH of run RUN_UUID (the
chunk's VARS, from its environment), resuming from output/training_logs/RUN_UUID/history."""
import argparse
import os
import sys
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--learning_rate", required=True)
alpha = parser.parse_args().learning_rate
epoch, per_job = int(os.environ["EPOCH"]), int(os.environ["EPOCHS_PER_JOB"])
logs = Path("output", "training_logs", os.environ["RUN_UUID"])
logs.mkdir(parents=True, exist_ok=True)
history = logs / "history"
first = epoch - per_job + 1
done = history.read_text().splitlines() if history.exists() else []
if len(done) != first - 1:
    sys.exit(f"resume mismatch: {len(done)} epochs trained before, this chunk starts at epoch {first}")
with history.open("a") as out:
    for e in range(first, epoch + 1):
        out.write(f"epoch {e} alpha {alpha} seed {os.environ['SEED']} site {os.environ['SITE']} "
                  f"run_number {os.environ['RUN_NUMBER']}\n")
