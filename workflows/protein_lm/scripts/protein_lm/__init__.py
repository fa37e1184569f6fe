"""METL-style protein language model: synthetic data, model, chunked training, evaluation.

The Snakemake rules in ``../rules`` call the thin scripts in ``../scripts``, which call into
this package; everything here is importable and testable without Snakemake.
"""
