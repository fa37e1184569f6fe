"""The two backends the conformance suite runs on, behind one seam: an `htcondor2.Schedd`-shaped
schedd, an `htcondor2.Collector`-shaped collector, and two annexes (AnnexName htcannex-expanse and
htcannex-delta, the annex START expression) whose jobs belong to `owner`.

- `embedded`: the embedded pool, always; a fresh daemon per test, annexes created by the test.
- `htcondor`: a real HTCondor personal pool, when HTCANNEX_TEST_CONDOR_CONFIG names its
  condor_config (with annex-like startds:
  AnnexName htcannex-expanse / htcannex-delta, 1 CPU, 2048 / 1024 MB, memory over-use held by
  SYSTEM_PERIODIC_HOLD; its startds run unprivileged, so without per-job cgroups). Skipped when the variable is unset or condor_master is not installed.
  Its jobs run as an unprivileged user (the realpool maps root to htcuser), so the submit
  directories are made world-writable below HTCANNEX_TEST_SUBMIT_BASE (default /tmp).
"""
import getpass
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import htcondor2
import pytest

from htcannex_pool import Pool

ANNEXES = {"htcannex-expanse": 2048, "htcannex-delta": 1024}  # AnnexName -> slot memory (MB)
CONFIG_VARIABLE = "HTCANNEX_TEST_CONDOR_CONFIG"


@dataclass
class Backend:
    name: str
    schedd: object
    collector: object
    owner: str
    submit_base: Path
    patience_s: float  # how long a job may take to be matched, run and logged here
    negotiation_s: float  # a few negotiation cycles: long enough for a matchable job to start
    stop: Callable[[], None] = field(default=lambda: None)

    def submit_dir(self) -> Path:
        """A fresh submit directory the job's owner can write."""
        directory = Path(tempfile.mkdtemp(prefix="conformance-", dir=self.submit_base))
        directory.chmod(0o777)
        return directory


def embedded(spool: Path, config: dict | None = None) -> Backend:
    """`config`: the pool's HTCondor macros (htcannex_pool/policy.py)."""
    pool = Pool(spool, idle_exit_s=120, cycle_s=0.05, slots=[{"cpus": 1, "memory_mb": 1024}], config=config)
    owner = getpass.getuser()
    for name, memory_mb in ANNEXES.items():
        pool.create_annex(name, owner=owner, cpus=1, memory_mb=memory_mb, lifetime_s=3600)
    return Backend("embedded", pool.schedd(), pool.collector(), owner, spool, patience_s=20, negotiation_s=1.5,
                   stop=pool.stop)


def real_htcondor(tmp_base: Path) -> Backend:
    config = os.environ.get(CONFIG_VARIABLE)
    if not config:
        pytest.skip(f"no real HTCondor: set {CONFIG_VARIABLE} to a personal pool's condor_config")
    if not Path(config).is_file():
        pytest.fail(f"{CONFIG_VARIABLE}={config}: no such file")
    os.environ["CONDOR_CONFIG"] = config
    htcondor2.reload_config()
    sbin = Path(htcondor2.param.get("SBIN", "/nonexistent"))
    if not (sbin / "condor_master").exists() and not shutil.which("condor_master"):
        pytest.skip(f"condor_master is not installed (looked in {sbin} and on PATH)")
    schedd = htcondor2.Schedd()
    collector = htcondor2.Collector()
    slots = collector.query(htcondor2.AdTypes.Startd, "AnnexName isnt undefined", ["AnnexName"])
    missing = set(ANNEXES) - {slot["AnnexName"] for slot in slots}
    if missing:
        pytest.fail(f"the pool at {config} has no slots of annex(es) {', '.join(sorted(missing))}; "
                    "give it startds that advertise them (this module's docstring says how they are set up)")
    base = Path(os.environ.get("HTCANNEX_TEST_SUBMIT_BASE", tempfile.gettempdir()))
    owner = htcondor2.param.get("ANNEX_OWNER", getpass.getuser())
    negotiation_s = 3 * float(htcondor2.param.get("NEGOTIATOR_INTERVAL", 60))
    return Backend("htcondor", schedd, collector, owner, base, patience_s=max(120.0, 2 * negotiation_s),
                   negotiation_s=negotiation_s)
