"""Rule make_data: the SYNTHETIC data set (protein_lm.data)."""
from pathlib import Path

from protein_lm.data import DataConfig, generate

snakemake = globals()["snakemake"]  # injected by Snakemake's script directive
generate(
    DataConfig(**snakemake.params.data),
    Path(snakemake.output.simulated),
    Path(snakemake.output.experimental),
    Path(snakemake.output.metadata),
)
