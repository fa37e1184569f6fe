"""Faults a weeks-long run meets, survived end to end: snakemake CLI -> executor -> embedded pool.

Each test injects one fault with the pool's fault hooks and checks what the user
relies on: the workflow still finishes, no work is duplicated, and the output
says what happened.
"""
import getpass
import subprocess
import threading

import htcondor2
import pytest
from waiting import wait_until

from htcannex_pool import Pool, faults

from .snakemake_runs import (annexes_by_job, board, events, kill_snakemake_once_running, read_until, run_snakemake,
                             snakemake_argv, start_snakemake)

pytestmark = pytest.mark.slow


def submissions(pool, rule):
    """Every job ever submitted for `rule`, queued or finished."""
    constraint = f'HtcannexRule == "{rule}"'
    projection = ["ClusterId", "ProcId", "RequestMemory", "JobStatus"]
    return pool.schedd().query(constraint, projection) + pool.schedd().history(constraint, projection)


def test_annex_expiring_under_a_running_chunk_moves_it_and_it_resumes_from_its_checkpoint(
        workdir, user_env, embedded_pool):
    # A self-checkpointing chunk (one step per start, exit 85 until step 6), round-robin: site a first.
    target = "steps-run0-chunk0.txt"
    snakemake = subprocess.Popen(snakemake_argv(workdir, target), cwd=workdir, env=user_env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Each checkpoint is an output transfer while the chunk runs on (the restart is in place).
        wait_until(lambda: _checkpoint_uploads(workdir) >= 2, timeout_s=60, what="two checkpointed steps")
        faults.expire_annex(embedded_pool, "htcannex-a")
        _, stderr = snakemake.communicate(timeout=120)
    finally:
        snakemake.kill()
    assert snakemake.returncode == 0, stderr[-4000:]
    steps = (workdir / target).read_text().splitlines()
    # Every step once, in order: nothing lost, nothing redone; the first ones on a, the last on b.
    assert [line.split(" on ")[0] for line in steps] == [f"step {n}" for n in range(1, 7)]
    where = [line.split(" on ")[1] for line in steps]
    assert where[:2] == ["htcannex-a"] * 2 and where[-1] == "htcannex-b" and where == sorted(where)
    [job] = submissions(embedded_pool, "steps")  # the same job, not a resubmission
    job_id = f"{job['ClusterId']}.{job['ProcId']}"
    assert any(kind == htcondor2.JobEventType.JOB_EVICTED and job == job_id for kind, job, _ in events(workdir))
    assert annexes_by_job(workdir)[job_id][-1] == "htcannex-b"
    assert "its annex htcannex-a is gone (expired?). Moved it to site b (annex htcannex-b)" in stderr


def _checkpoint_uploads(workdir) -> int:
    """Output transfers begun so far: each one before the job's end uploaded a self-checkpoint."""
    if not (workdir / ".htcannex" / "jobs.log").exists():
        return 0
    return sum(1 for kind, _, event in events(workdir) if kind == htcondor2.JobEventType.FILE_TRANSFER
               and event["Type"] == htcondor2.FileTransferEventType.OUT_STARTED)


def test_annex_that_never_comes_up_sends_the_waiting_job_to_the_next_site(workdir, user_env, embedded_pool):
    # Site a's annex was requested but its batch job never starts.
    embedded_pool.create_annex("htcannex-a", owner=getpass.getuser(), cpus=1, memory_mb=2048,
                               lifetime_s=1800, comes_up=False)
    result = run_snakemake(workdir, user_env, "run0-chunk0.txt")
    assert result.returncode == 0, result.stderr[-4000:]
    [job] = submissions(embedded_pool, "chunk")
    assert annexes_by_job(workdir)[f"{job['ClusterId']}.{job['ProcId']}"] == ["htcannex-b"]
    assert "annex htcannex-a did not come up" in result.stderr
    assert "Moved it to site b" in result.stderr


def test_annex_that_came_up_too_small_for_the_job_sends_it_to_the_next_site(workdir, user_env, embedded_pool):
    # The catalogue says site a has 2 GB slots; its annex came up with 512 MB ones.
    embedded_pool.create_annex("htcannex-a", owner=getpass.getuser(), cpus=1, memory_mb=512, lifetime_s=1800)
    result = run_snakemake(workdir, user_env, "run0-chunk0.txt")
    assert result.returncode == 0, result.stderr[-4000:]
    [job] = submissions(embedded_pool, "chunk")
    job_id = f"{job['ClusterId']}.{job['ProcId']}"
    assert annexes_by_job(workdir)[job_id] == ["htcannex-b"]
    assert f"no slot of its annex htcannex-a can run it (`htcannex why {job_id}`" in result.stderr
    assert "Moved it to site b" in result.stderr


def test_memory_overuse_hold_is_reported_and_retried_with_more_memory(workdir, user_env, embedded_pool):
    result = run_snakemake(workdir, user_env, "hog.txt")
    assert result.returncode == 0, result.stderr[-4000:]
    assert (workdir / "hog.txt").exists()
    first, second = sorted(ad["RequestMemory"] for ad in submissions(embedded_pool, "hog"))
    assert second - first == 1500 - 250  # attempt 2's mem_mb (the executor adds the same overhead to both)
    assert "used more memory than it requested" in result.stderr
    [row] = board(workdir, embedded_pool)["rows"]
    assert (row["rule"], row["jobs"]) == ("hog", 2)  # a retry in the same Snakemake run is a resubmission
    held = [event for kind, _, event in events(workdir) if kind == htcondor2.JobEventType.JOB_HELD]
    assert [event["HoldReasonCode"] for event in held] == [34]


# How a pool without cgroup memory limits holds a job over its request (as a personal pool with unprivileged startds does).
SYSTEM_PERIODIC_MEMORY_HOLD = {
    "CGROUP_MEMORY_LIMIT_POLICY": "none",
    "SYSTEM_PERIODIC_HOLD": "JobStatus == 2 && MemoryUsage =!= undefined && MemoryUsage > RequestMemory",
    "SYSTEM_PERIODIC_HOLD_REASON": 'strcat("memory usage ", MemoryUsage, " MB exceeded request_memory ", '
                                   'RequestMemory, " MB")',
}


def test_memory_hold_by_system_policy_is_retried_with_more_memory(workdir, user_env, embedded_pool):
    # The rule asks for a fixed 300 MB and uses ~400: a retry with the same request would be held again.
    Pool(embedded_pool.spool_dir, config=SYSTEM_PERIODIC_MEMORY_HOLD)
    result = run_snakemake(workdir, user_env, "hog-fixed.txt")
    assert result.returncode == 0, result.stderr[-4000:]
    assert sorted(ad["RequestMemory"] for ad in submissions(embedded_pool, "hog_fixed")) == [300, 600]
    held = [event for kind, _, event in events(workdir) if kind == htcondor2.JobEventType.JOB_HELD]
    assert [(event["HoldReasonCode"], event["HoldReasonSubCode"]) for event in held] == [(26, 0)]
    assert "give rule hog_fixed more memory" in result.stderr
    assert "A retry asks for at least 600 MB (it was held with 300 MB)" in result.stderr


def test_a_job_killed_by_sigkill_without_a_hold_is_retried_with_more_memory(workdir, user_env, embedded_pool):
    # Where no cgroup limit holds a job (annexes, glideins), an out-of-memory killer ends it with SIGKILL: the
    # same request would die the same way, so the retry asks for more, as after a memory hold.
    result = run_snakemake(workdir, user_env, "killed.txt", extra=["--retries", "1"])
    assert result.returncode != 0  # the rule kills itself on every attempt
    assert sorted(ad["RequestMemory"] for ad in submissions(embedded_pool, "killed")) == [300, 600]
    assert "A retry asks for at least 600 MB (it was killed asking for 300 MB)" in result.stderr
    assert not [event for kind, _, event in events(workdir) if kind == htcondor2.JobEventType.JOB_HELD]


def test_a_command_killed_under_the_job_s_own_snakemake_is_named_and_retried_with_more_memory(
        workdir, user_env, embedded_pool):
    # A run: block keeps Snakemake in the job: the killed command makes it exit 1, and says why in its stderr.
    result = run_snakemake(workdir, user_env, "killed-in-snakemake.txt", extra=["--retries", "1"])
    assert result.returncode != 0
    assert "had a command killed by SIGKILL (its Snakemake says so above)" in result.stderr, result.stderr[-3000:]
    first, second = sorted(ad["RequestMemory"] for ad in submissions(embedded_pool, "killed_in_snakemake"))
    assert second == 2 * first  # the request with room for the job's Snakemake, doubled
    assert f"A retry asks for at least {second} MB (it was killed asking for {first} MB)" in result.stderr


def test_an_annex_s_out_of_memory_kill_is_retried_with_more_memory_on_the_next_site(workdir, user_env, embedded_pool):
    # An annex has no per-job cgroup: a job over its request is not held, but over its annex's batch job it is
    # killed (SIGKILL, exit 137 from its shell). The retry asks for twice the memory, on the next site.
    result = run_snakemake(workdir, user_env, "oom-run0-chunk0.txt")
    assert result.returncode == 0, result.stderr[-4000:]
    assert "exited 137 (128 + SIGKILL: a command in it was killed) and HTCondor did not hold it" in result.stderr
    assert "A retry asks for at least 200 MB (it was killed asking for 100 MB)" in result.stderr
    assert sorted(ad["RequestMemory"] for ad in submissions(embedded_pool, "oom")) == [100, 200]
    assert [annexes for annexes in annexes_by_job(workdir).values()] == [["htcannex-small"], ["htcannex-a"]]
    assert not [event for kind, _, event in events(workdir) if kind == htcondor2.JobEventType.JOB_HELD]


def test_failed_input_transfer_is_released_and_the_job_finishes(workdir, user_env, embedded_pool):
    faults.fail_next_transfer(embedded_pool)
    result = run_snakemake(workdir, user_env, "copied.txt")
    assert result.returncode == 0, result.stderr[-4000:]
    assert (workdir / "copied.txt").read_text() == "precious input\n"
    assert len(submissions(embedded_pool, "copy")) == 1  # released, not resubmitted
    kinds = [(kind, event.get("HoldReasonCode")) for kind, _, event in events(workdir)
             if kind in (htcondor2.JobEventType.JOB_HELD, htcondor2.JobEventType.JOB_RELEASED)]
    assert kinds == [(htcondor2.JobEventType.JOB_HELD, 13), (htcondor2.JobEventType.JOB_RELEASED, None)]
    assert "after a transient hold" in result.stderr


def test_restarted_snakemake_adopts_the_running_job_instead_of_resubmitting(workdir, user_env, embedded_pool):
    target = "run0-chunk0.txt"
    # Its job runs until the restarted Snakemake has adopted it, however slow the machine (with a fixed sleep, a
    # loaded machine let it end while Snakemake was down: then Snakemake stops at its incomplete marker).
    go = workdir.parent / "go"
    options = ["--config", f"wait_for={go}"]
    kill_snakemake_once_running(workdir, user_env, embedded_pool, "chunk", target, options)
    restarted = start_snakemake(workdir, user_env, target, extra=options)
    let_it_end = threading.Timer(120, go.touch)  # an adoption that never comes fails the test, not the suite
    let_it_end.start()
    try:
        adopted = read_until(restarted, "Adopted HTCondor job")
        go.touch()
        rest, _ = restarted.communicate(timeout=120)
    finally:
        let_it_end.cancel()
        go.touch()
        restarted.kill()
    assert restarted.returncode == 0, (adopted + rest)[-4000:]
    assert (workdir / target).read_text() == "run 0 chunk 0\n"
    [job] = submissions(embedded_pool, "chunk")
    assert f"Adopted HTCondor job {job['ClusterId']}.{job['ProcId']}" in adopted


@pytest.mark.parametrize("exit_code, output_deleted", [(0, False), (3, False), (0, True)],
                         ids=["completed", "failed", "output-deleted"])
def test_restarted_snakemake_adopts_a_job_that_completed_while_it_was_down(workdir, user_env, embedded_pool,
                                                                           exit_code, output_deleted):
    target = "run0-chunk0.txt"
    options = ["--config", "sleep=3", f"exit_code={exit_code}"]
    kill_snakemake_once_running(workdir, user_env, embedded_pool, "chunk", target, options)
    wait_until(lambda: embedded_pool.schedd().history('HtcannexRule == "chunk"', ["ClusterId"]),
               timeout_s=60, what="the chunk to finish")
    if exit_code == 0:
        # Its output came back while Snakemake was down: Snakemake stops at its incomplete marker.
        stopped = run_snakemake(workdir, user_env, target, extra=options)
        assert stopped.returncode != 0 and "--rerun-incomplete" in stopped.stderr
    if output_deleted:
        (workdir / target).unlink()
    result = run_snakemake(workdir, user_env, target, extra=[*options[:2], "exit_code=0", "--rerun-incomplete"])
    assert result.returncode == 0, result.stderr[-4000:]
    assert (workdir / target).read_text() == "run 0 chunk 0\n"
    first, *again = submissions(embedded_pool, "chunk")
    adopted = f"Adopted HTCondor job {first['ClusterId']}.{first['ProcId']} for job"
    if exit_code != 0 or output_deleted:
        assert len(again) == 1 and adopted not in result.stderr  # run again
        return
    assert not again, "the job that completed while Snakemake was down ran again"
    assert adopted in result.stderr and "completed (exit code 0) while Snakemake was down" in result.stderr
    # A run that asks for the job again (--forcerun) runs it: only a job Snakemake never saw end is adopted.
    forced = run_snakemake(workdir, user_env, target, extra=[*options, "--forcerun", target])
    assert forced.returncode == 0 and "Adopted" not in forced.stderr, forced.stderr[-4000:]
    assert len(submissions(embedded_pool, "chunk")) == 2


def test_a_driver_restarted_after_a_memory_hold_asks_for_the_raised_request(workdir, user_env, embedded_pool):
    """The raised request outlives the Snakemake that raised it (.htcannex/memory-floors.json): a run stopped
    after a memory hold, and started again, asks for what the retry would have, not the rule's mem_mb again."""
    Pool(embedded_pool.spool_dir, config=SYSTEM_PERIODIC_MEMORY_HOLD)
    stopped = run_snakemake(workdir, user_env, "hog-fixed.txt", extra=["--retries", "0"])
    assert stopped.returncode != 0
    assert "A retry asks for at least 600 MB (it was held with 300 MB)" in stopped.stderr
    restarted = run_snakemake(workdir, user_env, "hog-fixed.txt", extra=["--retries", "0"])
    assert restarted.returncode == 0, restarted.stderr[-4000:]
    assert sorted(ad["RequestMemory"] for ad in submissions(embedded_pool, "hog_fixed")) == [300, 600]
