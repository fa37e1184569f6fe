"""Fixtures: a workflow directory that is also its own Snakemake profile, and a user whose
embedded pool is the test's."""
import os
import shutil

import pytest

from .snakemake_runs import BIN, FAULTS


@pytest.fixture
def workdir(tmp_path):
    work = tmp_path / "work"
    shutil.copytree(FAULTS, work)
    (work / "input.txt").write_text("precious input\n")
    return work


@pytest.fixture
def user_env(tmp_path, embedded_pool):
    env = dict(os.environ)
    env["HTCANNEX_POOL_DIR"] = str(embedded_pool.spool_dir)
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    return env
