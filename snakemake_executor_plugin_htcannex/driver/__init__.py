"""The walk-away driver: Snakemake itself as an HTCondor local-universe job."""
