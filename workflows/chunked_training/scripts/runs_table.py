"""Rule runs_table: one row per run of the experiment (uuid, seed, every var's value)."""
import csv

snakemake = globals()["snakemake"]  # injected by Snakemake's script directive
with open(snakemake.output[0], "w", newline="") as handle:
    writer = csv.DictWriter(handle, fieldnames=list(snakemake.params.runs[0]), delimiter="\t", lineterminator="\n")
    writer.writeheader()
    writer.writerows(snakemake.params.runs)
