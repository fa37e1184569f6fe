"""Helpers for the embedded pool's tests (fixtures are in conftest.py)."""
import contextlib
import sys
import os
import signal
import textwrap
from pathlib import Path

import htcondor2
import psutil

from htcannex_pool import Pool
from waiting import wait_until  # noqa: F401  (the pool tests import it from here)

ONE_SLOT = [{"cpus": 2, "memory_mb": 4096}]


def make_pool(spool: Path, **options) -> Pool:
    return Pool(spool, **{"idle_exit_s": 120, "cycle_s": 0.05, "slots": ONE_SLOT, **options})


def stop_for_sure(pool: Pool):
    """Stop the daemon; if it will not stop, kill it, so no test leaves one behind."""
    pid = pool.recorded_pid()
    try:
        pool.stop(timeout_s=15)
    finally:
        if pid and psutil.pid_exists(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def python_script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def submit(pool: Pool, commands: dict, **kwargs):
    # File transfer, as htcannex asks for it (condor_submit's default, IF_NEEDED, transfers nothing on a pool
    # that shares the submit machine's filesystem).
    return pool.schedd().submit(htcondor2.Submit({"log": "jobs.log", "should_transfer_files": "YES", **commands}),
                                **kwargs)


def job_status(pool: Pool, job_id: str) -> int | None:
    """JobStatus of a queued job, or 4/3 from history once it left the queue."""
    cluster, proc = job_id.split(".")
    constraint = f"ClusterId == {cluster} && ProcId == {proc}"
    for ads in (pool.schedd().query(constraint, ["JobStatus"]),
                pool.schedd().history(constraint, ["JobStatus"], 1)):
        if ads:
            return ads[0]["JobStatus"]
    return None


def wait_for_status(pool: Pool, job_id: str, status: int, timeout_s: float = 20.0):
    wait_until(lambda: job_status(pool, job_id) == status, timeout_s, f"job {job_id} in status {status}")


def events(log: Path) -> list:
    return list(htcondor2.JobEventLog(str(log)).events(0)) if log.exists() else []


def event_types(log: Path, job_id: str) -> list:
    cluster, proc = (int(part) for part in job_id.split("."))
    return [event.type for event in events(log) if (event.cluster, event.proc) == (cluster, proc)]
