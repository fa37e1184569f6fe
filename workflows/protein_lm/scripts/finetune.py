"""Rule finetune: fine-tune on the experimental set, Spearman on its test split (protein_lm.evaluation)."""
import json
from pathlib import Path

from protein_lm.evaluation import FinetuneConfig, finetune
from protein_lm.runtime import skip_exit_collections

snakemake = globals()["snakemake"]  # injected by Snakemake's script directive
settings = snakemake.params.finetune
cfg = FinetuneConfig(epochs=settings["epochs"], lr=settings["lr"], batch_size=settings["batch_size"])
metrics = finetune(Path(snakemake.input.checkpoint), Path(snakemake.input.data), cfg, snakemake.threads)
Path(snakemake.output[0]).write_text(json.dumps(metrics, indent=2) + "\n")
skip_exit_collections()
