"""Real annexes: tests marked `realsite` run htcannex against annexes that HTCondor's own
`htcondor annex create` makes on Slurm over ssh, all on this machine (the harness: start.sh here).

They run only when asked for (`pytest -m realsite`), as root on a machine with HTCondor (condor_master on
PATH), Slurm (slurmctld, slurmd), munge and sshd: a default run never starts Slurm, and where something is
missing they skip saying what. The harness is started if it is not up, and stopped afterwards if it was
started here (REALSITE_KEEP=1 leaves it up).
"""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from realsite_harness import HERE, NEEDED, Realsite


def selected(config) -> bool:
    expression = config.getoption("markexpr") or ""
    return "realsite" in expression and "not realsite" not in expression


def pytest_collection_modifyitems(config, items):
    if selected(config):
        return
    skip = pytest.mark.skip(reason="a realsite test: it starts Slurm, sshd and an HTCondor pool; run it with -m realsite")
    for item in items:
        if item.get_closest_marker("realsite") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def realsite():
    missing = [f"{name} ({where})" for name, where in NEEDED.items() if shutil.which(name) is None]
    if missing:
        pytest.skip(f"no real site here: missing {', '.join(missing)}")
    if os.geteuid() != 0:
        pytest.skip("the realsite harness starts Slurm, munge and sshd: run as root")
    state = Path(os.environ.get("REALSITE_DIR", Path(tempfile.gettempdir()) / "realsite"))
    user = os.environ.get("REALSITE_USER", "htcuser")
    started_here = not (state / "as-user").exists() or subprocess.run(
        [str(state / "as-user"), "condor_status", "-schedd", "-af", "Name"], capture_output=True).returncode != 0
    if started_here:
        started = subprocess.run([str(HERE / "start.sh")], capture_output=True, text=True, timeout=1200)
        if started.returncode != 0:
            pytest.fail(f"tests/realsite/start.sh failed:\n{started.stdout[-3000:]}\n{started.stderr[-3000:]}")
    yield Realsite(state, user)
    if started_here and not os.environ.get("REALSITE_KEEP"):
        subprocess.run([str(HERE / "stop.sh")], capture_output=True, timeout=300)
