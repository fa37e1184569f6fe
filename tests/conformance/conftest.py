"""The conformance suite's backend: every test runs on the embedded pool and, when one is configured,
on a real HTCondor (backends.py). The tests that run Snakemake on a real HTCondor only share the
`htcondor`, `workdir` and `env` fixtures."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from ops.snakemake_runs import BIN, FAULTS, HTCANNEX

from backends import ANNEXES, embedded, real_htcondor
from snakemake_executor_plugin_htcannex.driver.control import drivers_in_queue
from snakemake_executor_plugin_htcannex.sites.site import ANNEX_NAME_PREFIX

REPOSITORY = Path(__file__).resolve().parents[2]


def _started(kind: str, tmp_path_factory, config: dict | None = None):
    # A short path: the embedded daemon's Unix socket path is limited to ~100 characters.
    return (embedded(tmp_path_factory.mktemp("pool"), config) if kind == "embedded"
            else real_htcondor(tmp_path_factory.getbasetemp()))


@pytest.fixture(params=["embedded", "htcondor"])
def backend(request, tmp_path_factory):
    started = _started(request.param, tmp_path_factory)
    yield started
    started.stop()


@pytest.fixture(params=["embedded", "htcondor"])
def backend_without_cgroups(request, tmp_path_factory):
    """An execute point without per-job cgroups, as annexes and glideins run: the embedded pool with
    BASE_CGROUP empty, or the real personal pool (its startds run unprivileged)."""
    started = _started(request.param, tmp_path_factory, config={"BASE_CGROUP": ""})
    yield started
    started.stop()


@pytest.fixture
def htcondor(tmp_path_factory):
    return real_htcondor(tmp_path_factory.getbasetemp())


@pytest.fixture
def workdir(htcondor):
    """The faults workflow in a directory the job's owner can write, its catalogue the pool's annexes."""
    work = htcondor.submit_dir()
    for name in ("Snakefile", "config.yaml"):
        shutil.copy(FAULTS / name, work / name)
    shutil.copytree(FAULTS / "scripts", work / "scripts")  # sources a job's own Snakemake takes along
    (work / "input.txt").write_text("precious input\n")
    sites = {annex.removeprefix(ANNEX_NAME_PREFIX): {"kind": "annex", "facts": "catalogue", "cpus": 1,
                                                      "memory": f"{memory_mb}MB", "gpus": 0,
                                                      "max_lifetime": "1h", "lifetime": "30m"}
             for annex, memory_mb in ANNEXES.items()}
    (work / "htcannex.yaml").write_text(yaml.safe_dump({
        "pool": "default",
        "rotation": {"chunk": {"policy": "round-robin", "sites": list(sites)}},
        "annex": {"mode": "off", "max_annexes": 2, "core_hour_budget": 10, "idle_timeout": "10m"},
        "sites": sites}))
    yield work
    if drivers_in_queue(htcondor.schedd, work):  # a failed test leaves nothing running
        subprocess.run([str(HTCANNEX), "stop", "-d", str(work)], capture_output=True, timeout=120)


@pytest.fixture
def env(htcondor):
    """Snakemake and htcannex of this checkout's venv, this checkout's code also in jobs' Pythons; CONDOR_CONFIG
    the pool's (set by real_htcondor)."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPOSITORY)}
