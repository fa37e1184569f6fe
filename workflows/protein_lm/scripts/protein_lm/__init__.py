"""METL-style protein language model: synthetic data, model, chunked training, evaluation.

The rules in ``rules/`` call the thin scripts next to this package (``scripts/*.py``), which
call into it; everything here is importable and testable without Snakemake. It lives under
``scripts/`` because Snakemake puts a script's directory on its ``sys.path`` and ships that
directory with jobs that have no shared filesystem.
"""
import sys
from pathlib import Path

# protein_lm is built on the chunked_training workflow beside it, whose package (its runs, chunks
# and the equivalence study) lives in its scripts/: importable wherever protein_lm is, on the
# access point (Snakemake, the rules' scripts, `python -m protein_lm....`). A training job's
# sandbox has no such directory, and needs none.
_CHUNKED_TRAINING = Path(__file__).resolve().parents[3] / "chunked_training" / "scripts"
if _CHUNKED_TRAINING.is_dir() and str(_CHUNKED_TRAINING) not in sys.path:
    sys.path.append(str(_CHUNKED_TRAINING))
