"""The way in: a Snakemake job becomes a checked HTCondor submit description."""
