"""The scripts htcannex prepares for script rules' jobs (.htcannex/scripts/, direct_command.py) go
when their jobs end, whichever way they end: failed, Ctrl-C, or adopted by a restarted Snakemake
and done; a killed run's scripts go at the next run's start, except those of jobs still queued.
Through the snakemake CLI on the faults workflow's script_chunk rule (tests/ops/workflows/faults)."""
import signal

import htcondor2
import pytest
from waiting import wait_until

from .snakemake_runs import kill_snakemake_once_running, read_until, run_snakemake, start_snakemake


def prepared_scripts(workdir) -> list[str]:
    directory = workdir / ".htcannex" / "scripts"
    return sorted(script.name for script in directory.iterdir()) if directory.is_dir() else []


def test_a_failed_jobs_script_goes(workdir, user_env, embedded_pool):
    result = run_snakemake(workdir, user_env, "script-run0.txt",
                           extra=["--config", "exit_code=3", "--retries", "0"])
    assert result.returncode != 0 and "exited with return value 3" in result.stderr, result.stderr[-4000:]
    assert prepared_scripts(workdir) == []


def test_ctrl_c_removes_the_jobs_and_their_scripts(workdir, user_env, embedded_pool):
    targets = ["script-run0.txt", "script-run1.txt"]
    snakemake = start_snakemake(workdir, user_env, *targets, extra=["--config", "sleep=60"])
    try:
        wait_until(lambda: len(embedded_pool.schedd().query('HtcannexRule == "script_chunk"', ["ClusterId"])) == 2,
                   timeout_s=60, what="both jobs to be queued")
        assert len(prepared_scripts(workdir)) == 2
        snakemake.send_signal(signal.SIGINT)
        output, _ = snakemake.communicate(timeout=60)
    finally:
        snakemake.kill()
    assert "Terminating processes on user request" in output and "Traceback" not in output, output[-4000:]
    assert embedded_pool.schedd().query("true", ["ClusterId"]) == []  # Ctrl-C removed them
    assert prepared_scripts(workdir) == []


@pytest.mark.slow  # about 25 s: a job that runs 20 s, through a kill -9 and a restart
def test_an_adopted_jobs_script_stays_until_it_ends_and_a_killed_runs_others_go(workdir, user_env, embedded_pool):
    target, options = "script-run0.txt", ["--config", "sleep=20"]
    kill_snakemake_once_running(workdir, user_env, embedded_pool, "script_chunk", target, options)
    [queued_jobs_script] = prepared_scripts(workdir)
    # A script whose job left the queue while Snakemake was down (it was killed before it could remove it).
    (workdir / ".htcannex" / "scripts" / "script_chunk-0123abcd.script_chunk.py").write_text("# stale\n")

    restarted = start_snakemake(workdir, user_env, target, extra=options)
    try:
        adopted = read_until(restarted, "Adopted HTCondor job")
        # The stale script went at the start; the adopted job's stays while the job is queued (the one
        # this run prepared goes once the job is adopted instead).
        wait_until(lambda: prepared_scripts(workdir) == [queued_jobs_script], timeout_s=10,
                   what=f"{queued_jobs_script} alone in .htcannex/scripts")
        rest, _ = restarted.communicate(timeout=120)
    finally:
        restarted.kill()
    assert restarted.returncode == 0, (adopted + rest)[-4000:]
    assert (workdir / target).read_text() == "script run 0\n"
    assert prepared_scripts(workdir) == []  # gone with the adopted job


def test_scripts_stay_while_a_job_from_an_older_htcannex_may_run_one(workdir, user_env, embedded_pool):
    scripts = workdir / ".htcannex" / "scripts"
    scripts.mkdir(parents=True)
    older, stale = scripts / "old-0123abcd.old.py", scripts / "script_chunk-89abcdef.script_chunk.py"
    older.write_text("# its job is queued\n")
    stale.write_text("# its job is gone\n")
    # Queued (held) as an htcannex from before HtcannexPreparedScript submitted it: only its command names it.
    embedded_pool.schedd().submit(htcondor2.Submit({
        "executable": "/bin/sh", "arguments": f"-c 'python {older.relative_to(workdir)}'",
        "MY.HtcannexSignature": '"from-an-older-htcannex"', "hold": "true"}))
    result = run_snakemake(workdir, user_env, "script-run0.txt")
    assert result.returncode == 0, result.stderr[-4000:]
    assert prepared_scripts(workdir) == sorted([older.name, stale.name])  # this run's own went with its job
