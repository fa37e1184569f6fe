"""Submit and walk away: `htcannex submit | status | stop` with the driver as a local-universe job
of the embedded pool (tests/ops/workflows/faults, its chunks chained with chain=1)."""
import json
import os
import signal
import subprocess
import sys

import htcondor2
import pytest
from waiting import wait_until

from .snakemake_runs import CHAIN, HTCANNEX, board, driver_events, events, running_chunk, snakemake_log, status



def htcannex(workdir, env, *args, timeout=120):
    return subprocess.run([str(HTCANNEX), *args], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=timeout)


def submit(workdir, env, *snakemake_args):
    return htcannex(workdir, env, "submit", "--profile", str(workdir), *snakemake_args)


def driver_ad(pool):
    ads = pool.schedd().query("HtcannexDriver isnt undefined", ["ClusterId", "JobStatus", "PoolProcessId",
                                                                "NumJobStarts"])
    return ads[0] if ads else None


@pytest.mark.slow
def test_a_driver_killed_comes_back_and_adopts_the_running_chunk(workdir, user_env, embedded_pool):
    submitted = submit(workdir, user_env, "run0-chunk1.txt", *CHAIN)
    assert submitted.returncode == 0, submitted.stderr
    assert "survives your logout" in submitted.stdout
    wait_until(lambda: running_chunk(embedded_pool.schedd()), timeout_s=120, what="chunk 0 to run")
    # The driver process dies as on a crash of the access point's Snakemake (kill -9, the OOM killer).
    first_pid = driver_ad(embedded_pool)["PoolProcessId"]
    os.kill(first_pid, signal.SIGKILL)
    wait_until(lambda: driver_ad(embedded_pool) is None, timeout_s=240, what="the driver to finish")
    assert (workdir / "run0-chunk1.txt").read_text() == "run 0 chunk 0\nrun 0 chunk 1\n"
    # One submission per chunk: chunk 0's job was adopted by the restarted driver, not submitted again.
    submits = [job for kind, job, _ in events(workdir) if kind == htcondor2.JobEventType.SUBMIT]
    assert len(submits) == 2, submits
    log = snakemake_log(workdir)
    assert f"Adopted HTCondor job {submits[0]}" in log
    assert "start 2: resuming" in log and "removing the stale lock" in log
    # The driver: started twice (requeued after the kill), then it ended by itself.
    kinds = driver_events(workdir)
    assert kinds.count(htcondor2.JobEventType.EXECUTE) == 2
    assert kinds[-1] == htcondor2.JobEventType.JOB_TERMINATED
    driver = board(workdir, embedded_pool)["driver"]
    assert (driver["state"], driver["restarts"]) == ("done", 1)
    assert driver["log"].endswith("snakemake.err") and driver["last_lines"]


@pytest.mark.slow
def test_a_workflow_whose_final_check_fails_shows_the_failed_check_on_the_board(workdir, user_env, embedded_pool):
    """Snakemake's own last lines only say a job failed: the board names the check."""
    assert submit(workdir, user_env, "checked.txt").returncode == 0
    wait_until(lambda: driver_ad(embedded_pool) is None, timeout_s=240, what="the driver to finish")
    driver = board(workdir, embedded_pool)["driver"]
    assert (driver["state"], driver["note"]) == ("failed", "Snakemake exited with 1")
    assert driver["failed_checks"] == ["FAILED CHECK: run r1: twin check: ERROR: a resume bug"]
    shown = status(workdir, embedded_pool, "--once").stdout
    assert "  FAILED CHECK: run r1: twin check: ERROR: a resume bug" in shown


@pytest.mark.slow
def test_an_access_point_restart_restarts_the_driver_and_nothing_is_submitted_twice(workdir, user_env,
                                                                                     embedded_pool):
    assert submit(workdir, user_env, "run0-chunk1.txt", *CHAIN).returncode == 0
    wait_until(lambda: running_chunk(embedded_pool.schedd()), timeout_s=120, what="chunk 0 to run")
    # The schedd goes down (the pool daemon stops: it kills the driver and evicts the chunk) and comes back.
    spool = ["--spool", str(embedded_pool.spool_dir)]
    assert htcannex(workdir, user_env, "pool", "stop", *spool).returncode == 0
    assert htcannex(workdir, user_env, "pool", "start", *spool).returncode == 0
    wait_until(lambda: driver_ad(embedded_pool) is None, timeout_s=240, what="the driver to finish")
    assert (workdir / "run0-chunk1.txt").read_text() == "run 0 chunk 0\nrun 0 chunk 1\n"
    submits = [job for kind, job, _ in events(workdir) if kind == htcondor2.JobEventType.SUBMIT]
    assert len(submits) == 2, submits  # chunk 0 ran again as the same job, adopted by the new driver
    assert f"Adopted HTCondor job {submits[0]}" in snakemake_log(workdir)
    kinds = driver_events(workdir)
    assert kinds.count(htcondor2.JobEventType.EXECUTE) == 2 and htcondor2.JobEventType.JOB_EVICTED in kinds


@pytest.mark.slow
def test_stop_mid_run_leaves_no_job_and_a_second_submit_is_refused(workdir, user_env, embedded_pool):
    assert submit(workdir, user_env, "run0-chunk1.txt", *CHAIN).returncode == 0
    chunk = wait_until(lambda: running_chunk(embedded_pool.schedd()), timeout_s=120, what="chunk 0 to run")
    again = submit(workdir, user_env, "run0-chunk1.txt", *CHAIN)
    assert again.returncode == 2
    assert "already runs Snakemake in" in again.stderr and "htcannex stop" in again.stderr
    shown = htcannex(workdir, user_env, "status", "--once", "--htcannex-config", str(workdir / "htcannex.yaml"))
    assert shown.returncode == 0, shown.stderr
    assert "driver 1.0: running" in shown.stdout and "snakemake.err" in shown.stdout
    stopped = htcannex(workdir, user_env, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert "no job of" in stopped.stdout
    assert embedded_pool.schedd().query("true", ["ClusterId"]) == []
    # Snakemake took the removal's SIGTERM (no new jobs), stop removed its chunk, the driver left removed.
    # The chunk running then (chunk 0, or chunk 1 if chunk 0 ended meanwhile) is the last one submitted.
    aborted = [job for kind, job, _ in events(workdir) if kind == htcondor2.JobEventType.JOB_ABORTED]
    submitted = [job for kind, job, _ in events(workdir) if kind == htcondor2.JobEventType.SUBMIT]
    assert aborted == submitted[-1:] and submitted[0] == f"{chunk['ClusterId']}.0"
    assert driver_events(workdir)[-1] == htcondor2.JobEventType.JOB_ABORTED
    assert "Will exit after finishing currently running jobs" in snakemake_log(workdir)  # SIGTERM
    driver = json.loads(htcannex(workdir, user_env, "status", "--json", "--htcannex-config",
                                 str(workdir / "htcannex.yaml")).stdout)["driver"]
    assert driver["state"] == "removed"


def test_the_driver_job_carries_the_restart_policy_and_the_users_notification_choice(workdir, user_env,
                                                                                    embedded_pool):
    submitted = htcannex(workdir, {**user_env, "MY_API_TOKEN": "not-for-the-job-ad"}, "submit",
                         "--notification", "error", "--notify-user", "me@example.org", "--max-starts", "4",
                         "--profile", str(workdir), "run0-chunk0.txt")
    assert submitted.returncode == 0, submitted.stderr
    assert "not passing MY_API_TOKEN" in submitted.stderr
    [ad] = embedded_pool.schedd().query("HtcannexDriver isnt undefined", [])
    htcannex(workdir, user_env, "stop")
    assert (ad["JobUniverse"], ad["JobNotification"], ad["NotifyUser"]) == (12, 3, "me@example.org")
    # A schedd shutdown kills the driver (jobs stay, the restart adopts them); removal sends SIGTERM.
    assert ad["KillSig"] == "SIGKILL" and "RemoveKillSig" not in ad and ad["Iwd"] == str(workdir)
    assert ad["RequestMemory"] == 1024
    def leaves_queue(**exit_):
        ad.update(exit_)
        return ad.eval("OnExitRemove")
    assert not leaves_queue(ExitBySignal=True, ExitSignal=9)  # killed: it runs again
    assert leaves_queue(ExitBySignal=False, ExitCode=1)  # Snakemake ended by itself
    assert "--max-starts 4" in ad["Arguments"]  # the driver gives up (exit 1) on its 5th start
    assert "not-for-the-job-ad" not in repr(ad) and "MY_API_TOKEN" not in ad["Environment"]


def test_a_driver_started_more_often_than_max_starts_gives_up(workdir, user_env):
    for start in (1, 2):
        result = subprocess.run([sys.executable, "-m", "snakemake_executor_plugin_htcannex.driver.entry",
                                 "--job", "7.0", "--workdir", str(workdir), "--max-starts", "1", "--", "--version"],
                                cwd=workdir, env=user_env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "was started 2 times (--max-starts 1)" in result.stderr
    assert "htcannex submit ARGS --rerun-incomplete" in result.stderr


def test_submit_refuses_a_directory_with_a_lock_and_says_unlock(workdir, user_env, embedded_pool):
    locks = workdir / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text(str(workdir / "input.txt") + "\n")
    refused = submit(workdir, user_env, "run0-chunk0.txt")
    assert refused.returncode == 2
    assert "locked by another Snakemake" in refused.stderr and "snakemake --unlock" in refused.stderr
    assert embedded_pool.schedd().query("true", ["ClusterId"]) == []


def test_submit_refuses_a_directory_the_job_owner_cannot_write(workdir, user_env, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes everywhere")
    workdir.chmod(0o555)
    try:
        refused = submit(workdir, user_env, "run0-chunk0.txt")
    finally:
        workdir.chmod(0o755)
    assert refused.returncode == 2 and "is not writable by" in refused.stderr


def test_submit_refuses_when_there_is_no_schedd(workdir, user_env):
    env = {**user_env, "CONDOR_CONFIG": "/nonexistent/condor_config"}
    refused = htcannex(workdir, env, "submit", "--schedd", "default", "--profile", str(workdir), "run0-chunk0.txt")
    assert refused.returncode == 2
    assert "no HTCondor schedd to submit the driver to" in refused.stderr


def test_submit_refuses_arguments_snakemake_refuses_and_a_dry_run(workdir, user_env):
    assert "Snakemake refuses these arguments" in submit(workdir, user_env, "--no-such-flag").stderr
    assert "run them with snakemake directly" in submit(workdir, user_env, "-n").stderr
    # A restart reruns Snakemake with the same arguments: forcing would redo finished work each time.
    assert "would redo, after every restart" in submit(workdir, user_env, "--forceall", "run0-chunk0.txt").stderr
    # The driver's arguments are kept in its job ad: no secret goes there.
    secret = submit(workdir, user_env, "run0-chunk0.txt", "--config", "API_TOKEN=abcdefgh12345")
    assert secret.returncode == 2 and "holds a secret" in secret.stderr and "abcdefgh12345" not in secret.stderr


def test_submit_refuses_a_python_the_driver_cannot_start_with(workdir, user_env, embedded_pool):
    refused = htcannex(workdir, user_env, "submit", "--python", "/nonexistent/python", "--profile", str(workdir),
                       "run0-chunk0.txt")
    assert refused.returncode == 2
    assert "can run no Python with snakemake and htcannex" in refused.stderr
    assert "/nonexistent/python: [Errno 2] No such file or directory" in refused.stderr
    assert embedded_pool.schedd().query("true", ["ClusterId"]) == []
