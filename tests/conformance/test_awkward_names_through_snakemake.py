"""A Hydra-style sweep whose names HTCondor's transfer lists cannot hold (commas, '=', spaces, '$', quotes,
non-ASCII: tests/snakefiles/workflows/awkward_names), through the snakemake CLI on every backend (conftest.py),
from a working directory whose own path has a comma: the outputs, logs and inputs arrive under their own names
(submit/transfer_names.py), as the local executor leaves them."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
WORKFLOW = Path(__file__).parents[1] / "snakefiles" / "workflows" / "awkward_names"
# Plain shell rules only: their jobs run no Python, which an execute point may lack.
TARGETS = ["lr=0.1,wd=0.01/eval.txt", "lr=0.2,wd=0.02/eval.txt", "odd/it's $HOME, é=1.txt"]


def test_a_hydra_sweep_with_commas_in_its_names_comes_back_under_its_own_names(backend):
    work = backend.submit_dir() / "my work, é"
    shutil.copytree(WORKFLOW, work)
    for directory in (work, *work.rglob("*")):
        directory.chmod(0o777 if directory.is_dir() else 0o666)
    embedded = backend.name == "embedded"
    (work / "htcannex.yaml").write_text(yaml.safe_dump({"pool": "local" if embedded else "default",
                                                        "annex": {"mode": "off"},
                                                        "sites": {"pool": {"kind": "pool", "cpus": 1, "memory": "1GB"}}}))
    pool = ["--htcannex-pool-dir", str(backend.submit_base)] if embedded else []
    # umask 0: on a real pool HTCondor writes the event log and the outputs as the job's owner, not as this user.
    done = subprocess.run([str(BIN / "snakemake"), "--executor", "htcannex", "--jobs", "2", "--retries", "0",
                           "--htcannex-config", "htcannex.yaml", *pool, *TARGETS], cwd=work, capture_output=True,
                          text=True, umask=0, env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
                          timeout=180 + 4 * backend.patience_s)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (work / "lr=0.1,wd=0.01" / "eval.txt").read_text() == "trained lr=0.1,wd=0.01\nevaluated\n"
    assert (work / "logs" / "lr=0.2,wd=0.02, train.log").read_text() == "log of lr=0.2,wd=0.02\n"
    assert (work / "odd" / "it's $HOME, é=1.txt").read_text() == "odd\n"
    assert not [path.name for path in work.iterdir() if path.name.startswith(".htcannex-out-")]
