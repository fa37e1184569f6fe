"""Every benchmark runs end to end at a tiny size, so that none can rot between the runs that
docs/benchmarks.md records. Nothing here is timed: a benchmark passes when it completes and
prints its side-by-side result line."""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TINY = {
    "overhead": (["--overhead-jobs", "2", "--overhead-script-jobs", "2", "--overhead-parallel", "1",
                  "--overhead-chain", "2"], "run: latency"),
    "tracking": (["--tracking-sizes", "3", "--peer-venvs"], "collector query"),  # the annex-wait rows
    "scale": (["--scale-sweeps", "1x2"], "against local -n with the profile's default-resources"),
    "chunking": (["--chunking-variants", "20"], "s of CPU per extra chunk"),
    "chunking-e2e": (["--chunking-variants", "20"], "one extra chunk costs"),
}


# overhead takes about 60 s at its tiny size (three rule kinds, each run four times through
# Snakemake), chunking-e2e about 20 s (two Snakemake runs of the chunked workflow on the pool).
SLOW = {"overhead", "chunking-e2e"}


@pytest.mark.parametrize("name, sizes", [
    pytest.param(name, sizes, marks=[pytest.mark.slow] if name in SLOW else []) for name, sizes in TINY.items()
])
def test_benchmark_runs_at_tiny_size(name, sizes):
    options, result_line = sizes
    done = subprocess.run([sys.executable, "-m", "bench", "--repeat", "1", "--only", name, *options],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert result_line in done.stdout, done.stdout
