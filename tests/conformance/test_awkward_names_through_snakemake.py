"""A Hydra-style sweep whose names HTCondor's transfer lists cannot hold (commas, '=', spaces, '$', quotes,
non-ASCII: tests/snakefiles/workflows/awkward_names), through the snakemake CLI on every backend (conftest.py),
from a working directory whose own path has a comma: the outputs, logs and inputs arrive under their own names
(submit/transfer_names.py), as the local executor leaves them."""
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
WORKFLOW = Path(__file__).parents[1] / "snakefiles" / "workflows" / "awkward_names"
# Plain shell rules only: their jobs run no Python, which an execute point may lack.
TARGETS = ["lr=0.1,wd=0.01/eval.txt", "lr=0.2,wd=0.02/eval.txt", "odd/it's $HOME, é=1.txt"]


def test_a_hydra_sweep_with_commas_in_its_names_comes_back_under_its_own_names(backend):
    work = backend.submit_dir() / "my work, é"
    shutil.copytree(WORKFLOW, work)
    for directory in (work, *work.rglob("*")):
        directory.chmod(0o777 if directory.is_dir() else 0o666)
    done = backend.snakemake(work, "--jobs", "2", "--retries", "0", *TARGETS, timeout_s=180 + 4 * backend.patience_s)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (work / "lr=0.1,wd=0.01" / "eval.txt").read_text() == "trained lr=0.1,wd=0.01\nevaluated\n"
    assert (work / "logs" / "lr=0.2,wd=0.02, train.log").read_text() == "log of lr=0.2,wd=0.02\n"
    assert (work / "odd" / "it's $HOME, é=1.txt").read_text() == "odd\n"
    assert not [path.name for path in work.iterdir() if path.name.startswith(".htcannex-out-")]
