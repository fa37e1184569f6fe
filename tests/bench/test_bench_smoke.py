"""Every benchmark runs end to end at a tiny size, so that none can rot between the runs that
docs/benchmarks.md records. Nothing here is timed: a benchmark passes when it completes and
prints its side-by-side result line."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conformance.backends import CONFIG_VARIABLE, real_htcondor

REPO = Path(__file__).resolve().parents[2]

TINY = {
    # Two of the four rule kinds: `script` (its stamp script) and `group` (the shell body in groups, and
    # the across-groups links); `shell` and `run` differ from them only in the rule body's text.
    "overhead": (["--overhead-jobs", "2", "--overhead-script-jobs", "2", "--overhead-parallel", "1",
                  "--overhead-chain", "2", "--overhead-kinds", "script", "group"], "group: latency"),
    "tracking": (["--tracking-sizes", "3", "--peer-venvs"], "collector query"),  # the annex-wait rows
    "scale": (["--scale-sweeps", "1x2"], "against local -n with the profile's default-resources"),
    "chunking": (["--chunking-variants", "20"], "s of CPU per extra chunk"),
    "chunking-e2e": (["--chunking-variants", "20"], "one extra chunk costs"),
    # A chain's hops and the sweep over two annexes, on the embedded pool (DAGMan and the peer need a real pool).
    "hop": (["--hop-chain", "2", "--hop-sweep", "2", "--hop-workloads", "chain", "sweep over 2 annexes"],
            "| sweep over 2 annexes | htcannex |"),
}


# overhead takes about 40-75 s at its tiny size (two rule kinds, each run five times through
# Snakemake), chunking-e2e about 20-45 s (two Snakemake runs of the chunked workflow on the pool), hop
# about 20 s (two Snakemake runs on the pool).
SLOW = {"overhead", "chunking-e2e", "hop"}


@pytest.mark.parametrize("name, sizes", [
    pytest.param(name, sizes, marks=[pytest.mark.slow] if name in SLOW else []) for name, sizes in TINY.items()
])
def test_benchmark_runs_at_tiny_size(name, sizes):
    options, result_line = sizes
    done = bench(name, *options)
    assert done.returncode == 0, done.stdout + done.stderr
    assert result_line in done.stdout, done.stdout


def bench(name, *options):
    return subprocess.run([sys.executable, "-m", "bench", "--repeat", "1", "--only", name, *options],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_overhead_on_htcondor_refuses_a_pool_that_does_not_answer(tmp_path):
    config = tmp_path / "condor_config"
    config.write_text(f"COLLECTOR_HOST = 127.0.0.1:9\nLOG = {tmp_path}\n")  # nothing listens on port 9
    done = bench("overhead", "--htcondor-config", str(config))
    assert done.returncode != 0
    assert f"--htcondor-config {config}: no HTCondor pool answers there" in done.stderr, done.stderr
    assert "overhead:" not in done.stdout  # refused before measuring anything


@pytest.mark.slow
def test_overhead_runs_on_a_real_htcondor_pool_at_tiny_size(tmp_path_factory):
    real_htcondor(tmp_path_factory.getbasetemp())  # skips without one (or without condor_master)
    done = bench("overhead", "--htcondor-config", os.environ[CONFIG_VARIABLE], "--overhead-kinds", "shell",
                 "--overhead-jobs", "2", "--overhead-chain", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "htcondor CPU by process" in done.stdout, done.stdout
