"""`htcannex submit | status | stop` on a real HTCondor: the flow tests/ops/test_driver.py runs on the
embedded pool, with the driver a local-universe job of a real schedd. Runs when
HTCANNEX_TEST_CONDOR_CONFIG names a personal pool's condor_config (backends.real_htcondor), skipped
otherwise. The faults workflow's chunks, chained, rotate over the pool's two annexes.

The driver runs as the job's owner (as root on the realpool: htcuser), with the Python `htcannex
submit` chooses for that user; PYTHONPATH makes that Python run this checkout's htcannex.
"""
import json
import re
import subprocess

import htcondor2
import pytest
from ops.snakemake_runs import CHAIN, HTCANNEX, driver_events, events, running_chunk, snakemake_log
from waiting import wait_until

from snakemake_executor_plugin_htcannex.driver.control import drivers_in_queue, run_jobs_constraint
from snakemake_executor_plugin_htcannex.driver.entry import other_snakemake

pytestmark = pytest.mark.slow


def htcannex(workdir, env, *args, timeout=120):
    return subprocess.run([str(HTCANNEX), *args], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=timeout)


def submit(workdir, env, *snakemake_args):
    submitted = htcannex(workdir, env, "submit", "--profile", str(workdir), "run0-chunk1.txt", *snakemake_args)
    assert submitted.returncode == 0, submitted.stderr
    return re.search(r"HTCondor job (\d+\.\d+)", submitted.stdout)[1]


def driver_status(workdir, env):
    shown = htcannex(workdir, env, "status", "--json", "--htcannex-config", str(workdir / "htcannex.yaml"))
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["driver"]


def test_on_htcondor_a_killed_driver_comes_back_and_adopts_the_running_chunk(htcondor, workdir, env):
    driver = submit(workdir, env, *CHAIN)
    wait_until(lambda: running_chunk(htcondor.schedd, workdir), htcondor.patience_s, "chunk 0 to run")
    # The driver's Snakemake dies as on a crash (kill -9, the OOM killer): HTCondor starts it again.
    wait_until(lambda: other_snakemake(workdir), 30, "the driver's Snakemake").kill()
    wait_until(lambda: not drivers_in_queue(htcondor.schedd, workdir), 300, "the driver to finish")
    assert (workdir / "run0-chunk1.txt").read_text() == "run 0 chunk 0\nrun 0 chunk 1\n"
    # One submission per chunk: chunk 0's job was adopted by the restarted driver.
    submits = [job for kind, job, _ in events(workdir) if kind == htcondor2.JobEventType.SUBMIT]
    assert len(submits) == 2, submits
    log = snakemake_log(workdir)
    assert f"Adopted HTCondor job {submits[0]}" in log and "start 2: resuming" in log
    kinds = driver_events(workdir)
    assert kinds.count(htcondor2.JobEventType.EXECUTE) == 2 and kinds[-1] == htcondor2.JobEventType.JOB_TERMINATED
    status = driver_status(workdir, env)
    assert (status["job"], status["state"], status["restarts"]) == (driver, "done", 1)


def test_on_htcondor_stop_mid_run_leaves_no_job_and_a_second_submit_is_refused(htcondor, workdir, env):
    driver = submit(workdir, env, "--config", "sleep=60", "chain=1")
    wait_until(lambda: running_chunk(htcondor.schedd, workdir), htcondor.patience_s, "chunk 0 to run")
    again = htcannex(workdir, env, "submit", "--profile", str(workdir), "run0-chunk1.txt")
    assert again.returncode == 2 and f"a driver (HTCondor job {driver}) already runs Snakemake" in again.stderr
    shown = htcannex(workdir, env, "status", "--once", "--htcannex-config", str(workdir / "htcannex.yaml"))
    assert f"driver {driver}: running" in shown.stdout and "snakemake.err" in shown.stdout
    stopped = htcannex(workdir, env, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert "no job of" in stopped.stdout
    assert not drivers_in_queue(htcondor.schedd, workdir)
    assert htcondor.schedd.query(run_jobs_constraint(workdir), ["ClusterId"]) == []
    assert driver_status(workdir, env)["state"] == "removed"


def test_on_htcondor_submit_refuses_a_directory_the_job_owner_cannot_write(htcondor, workdir, env):
    workdir.chmod(0o555)  # the job's owner is never root on HTCondor: as root here, the schedd's user
    try:
        refused = htcannex(workdir, env, "submit", "--profile", str(workdir), "run0-chunk1.txt")
    finally:
        workdir.chmod(0o777)
    assert refused.returncode == 2
    assert f"{workdir} is not writable by" in refused.stderr and "the driver job's owner" in refused.stderr
    assert not drivers_in_queue(htcondor.schedd, workdir)
