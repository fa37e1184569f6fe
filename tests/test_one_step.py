"""A chunk's job runs exactly its own step (one_step.py), with the pool giving every input the
transfer's second as mtime as HTCondor does: a chain of `script:` chunks, each running a Snakemake
in its job, through the snakemake CLI, htcannex and the embedded pool, with the checkpoints as OSDF
objects and as local files the executor transfers (either way a Python script runs without
Snakemake unless --htcannex-snakemake-in-every-job asks for it, as here)."""
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parent
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("store", ["local", "osdf"])
def test_each_chunk_job_runs_one_step(tmp_path, embedded_pool, store):
    workdir = tmp_path / "work"
    shutil.copytree(HERE / "workflows" / "script_chain", workdir)
    env = {**os.environ, "HTCANNEX_POOL_DIR": str(embedded_pool.spool_dir), "XDG_CONFIG_HOME": str(tmp_path),
           "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        ["snakemake", "--executor", "htcannex", "--profile", str(REPO / "profiles" / "local"),
         "--config", f"store={store}", f"prefix={uuid.uuid4().hex}", "chunks=3", "--htcannex-snakemake-in-every-job"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    job_logs = sorted((workdir / ".htcannex" / "logs").glob("train_chunk-*.err"))
    assert len(job_logs) == 3
    for log in job_logs:
        # The Snakemake in each job: one step, its own chunk (chunk 3's job would otherwise
        # retrain chunks 1 and 2, "3 of 3 steps", on chunk 3's site).
        steps = re.findall(r"(\d+) of (\d+) steps", log.read_text())
        assert steps == [("1", "1")], f"{log.name}: {steps}\n{log.read_text()[-3000:]}"
