"""Rule evaluate_chunk: validation metrics of one checkpoint (protein_lm.evaluation)."""
import gc

gc.disable()  # torch's start-up without collections, until protein_lm.runtime.configure

import json
from pathlib import Path

from protein_lm.evaluation import evaluate_checkpoint
from protein_lm.runtime import end_process

snakemake = globals()["snakemake"]  # injected by Snakemake's script directive
metrics = evaluate_checkpoint(Path(snakemake.input.checkpoint), Path(snakemake.input.data), snakemake.threads)
Path(snakemake.output[0]).write_text(json.dumps(metrics, indent=2) + "\n")
end_process()
