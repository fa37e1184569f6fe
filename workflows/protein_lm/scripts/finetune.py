"""Rule finetune: METL's fine-tuning protocol and, when configured, the training-set-size sweep
with its baselines; Spearman on the experimental test split (protein_lm.finetuning)."""
import gc

gc.disable()  # torch's start-up without collections, until protein_lm.runtime.configure

import json
from pathlib import Path

from protein_lm.finetuning import FinetuneConfig, finetune
from protein_lm.runtime import end_process

snakemake = globals()["snakemake"]  # injected by Snakemake's script directive
cfg = FinetuneConfig.from_dict(snakemake.params.finetune)
metrics = finetune(Path(snakemake.input.checkpoint), Path(snakemake.input.data), cfg, snakemake.threads)
Path(snakemake.output[0]).write_text(json.dumps(metrics, indent=2) + "\n")
end_process()
