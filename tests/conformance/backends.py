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
- `annex` (annex behaviours only, test_annexes.py): real annexes, made by HTCondor's own `htcondor annex
  create` as Slurm jobs over ssh on the realsite harness (tests/realsite/start.sh), when
  HTCANNEX_TEST_REALSITE names its state directory; skipped otherwise.
"""
import getpass
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import htcondor2
import pytest
import yaml

from htcannex_pool import Pool

BIN = Path(sys.executable).parent  # this venv's snakemake, and the Python its jobs run on the embedded pool
ANNEXES = {"htcannex-expanse": 2048, "htcannex-delta": 1024}  # AnnexName -> slot memory (MB)
CONFIG_VARIABLE = "HTCANNEX_TEST_CONDOR_CONFIG"
REALSITE_VARIABLE = "HTCANNEX_TEST_REALSITE"
# The real annexes: queue@system and the pilot's memory (MB). A pilot rounds each job's memory up to its
# system's MEMORY_CHUNK_SIZE (expanse.fragment 2048, spark.sh 3072): Delta's needs more than 1024 MB.
REAL_ANNEXES = {"htcannex-expanse": ("shared@expanse", 2048), "htcannex-delta": ("cpu@delta", 4096)}


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

    def snakemake(self, work: Path, *arguments: str, timeout_s: float) -> subprocess.CompletedProcess:
        """`snakemake --executor htcannex ARGUMENTS` in `work` on this backend, with a profile of one pool
        site written there as htcannex.yaml (the embedded pool's own, or the real pool's schedd)."""
        embedded = self.name == "embedded"
        (work / "htcannex.yaml").write_text(yaml.safe_dump({"pool": "local" if embedded else "default",
                                                            "annex": {"mode": "off"},
                                                            "sites": {"pool": {"kind": "pool", "cpus": 1, "memory": "1GB"}}}))
        pool = ["--htcannex-pool-dir", str(self.submit_base)] if embedded else []
        # umask 0: on a real pool HTCondor writes the event log and the outputs as the job's owner, not this user.
        return subprocess.run([str(BIN / "snakemake"), "--executor", "htcannex", "--htcannex-config", "htcannex.yaml",
                               *pool, *arguments], cwd=work, capture_output=True, text=True, umask=0,
                              env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}, timeout=timeout_s)


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


def real_annexes(tmp_base: Path) -> Backend:
    """The realsite harness's access point with two real annexes, made here when they are not up: each
    a Slurm job whose pilot joins the pool, for the harness's user and for whoever runs the tests."""
    state = os.environ.get(REALSITE_VARIABLE)
    if not state:
        pytest.skip(f"no real annexes: set {REALSITE_VARIABLE} to the realsite harness's state directory "
                    "(tests/realsite/start.sh)")
    as_user = Path(state) / "as-user"
    if not as_user.exists():
        pytest.fail(f"{REALSITE_VARIABLE}={state}: no realsite harness there (tests/realsite/start.sh makes one)")
    os.environ["CONDOR_CONFIG"] = str(Path(state) / "pool" / "condor_config")
    htcondor2.reload_config()
    schedd, collector = htcondor2.Schedd(), htcondor2.Collector()
    user = subprocess.run([str(as_user), "id", "-un"], capture_output=True, text=True, check=True).stdout.strip()

    def up() -> set:
        return {slot["AnnexName"] for slot in collector.query(htcondor2.AdTypes.Startd, "AnnexName isnt undefined",
                                                               ["AnnexName"])}

    for name, (queue, memory_mb) in REAL_ANNEXES.items():
        if name in up():
            continue
        # `create` refuses an annex no queued job is for (HPC_ANNEX_REQUIRE_JOB).
        placeholder = schedd.submit(htcondor2.Submit({"executable": "/bin/true", "hold": "true",
                                                      "MY.TargetAnnexName": f'"{name}"'}))
        try:
            created = subprocess.run(
                [str(as_user), "env", "_CONDOR_ANNEX_USE_OLD_CREATE=true", "htcondor", "annex", "create", name,
                 queue, "--cpus", "1", "--mem_mb", str(memory_mb), "--lifetime", "3600", "--idle-time", "900",
                 "--project", "conformance", "--owners", f"{user},{getpass.getuser()}"],
                capture_output=True, text=True, timeout=300)
            if created.returncode != 0:
                pytest.fail(f"htcondor annex create {name} failed:\n{created.stdout[-2000:]}{created.stderr[-2000:]}")
        finally:
            schedd.act(htcondor2.JobAction.Remove, f"{placeholder.cluster()}.0", "placeholder for annex create")
    deadline = time.time() + 180
    while set(REAL_ANNEXES) - up():
        if time.time() > deadline:
            pytest.fail(f"annexes {sorted(set(REAL_ANNEXES) - up())} did not come up within 180 s")
        time.sleep(2)
    negotiation_s = 3 * float(htcondor2.param.get("NEGOTIATOR_INTERVAL", 60))
    base = Path(os.environ.get("HTCANNEX_TEST_SUBMIT_BASE", tempfile.gettempdir()))
    return Backend("annex", schedd, collector, getpass.getuser(), base, patience_s=max(120.0, 2 * negotiation_s),
                   negotiation_s=negotiation_s)
