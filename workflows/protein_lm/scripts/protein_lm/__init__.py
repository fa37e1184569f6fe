"""METL-style protein language model: synthetic data, model, chunked training, evaluation.

The rules in ``rules/`` call the thin scripts next to this package (``scripts/*.py``), which
call into it; everything here is importable and testable without Snakemake. It lives under
``scripts/`` because Snakemake puts a script's directory on its ``sys.path`` and ships that
directory with jobs that have no shared filesystem.
"""
