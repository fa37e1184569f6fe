"""No silent, uninterruptible hang: a pool daemon killed under a running job is
noticed and said and the run still finishes; a job no slot can ever run is said a negotiation cycle after
it was queued and reported again at the idle timeout with `htcannex why`'s explanation, and fails, or waits
until Ctrl-C ends the run, while a job only waiting behind the run's own jobs waits."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from snakemake_executor_plugin_htcannex.paths import annex_ledger
from waiting import wait_until

from .snakemake_runs import FAULTS, TOO_BIG, annexes_by_job, read_until, run_snakemake, snakemake_argv, start_snakemake


def workflow(tmp_path: Path, snakefile: str) -> Path:
    """The faults profile (embedded pool, 1 s status checks, idle timeout 3 s) with this Snakefile."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("config.yaml", "htcannex.yaml"):
        (work / name).write_text((FAULTS / name).read_text())
    (work / "Snakefile").write_text(snakefile)
    return work


def test_a_killed_pool_daemon_is_said_and_its_job_runs_again(tmp_path, user_env, embedded_pool):
    work = workflow(tmp_path, 'rule a:\n    output: "a.txt"\n    shell: "sleep 3; echo done > {output}"\n')
    snakemake = subprocess.Popen(snakemake_argv(work, "a.txt"), cwd=work, env=user_env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: embedded_pool.schedd().query("JobStatus == 2", ["ClusterId"]), 60, "the job running")
        os.kill(embedded_pool.recorded_pid(), signal.SIGKILL)
        output, _ = snakemake.communicate(timeout=90)
    finally:
        snakemake.kill()
    assert snakemake.returncode == 0, output[-3000:]
    assert "ended without shutting down (killed or crashed); starting a new one" in output
    assert (work / "a.txt").read_text() == "done\n"
    # This client's connection led to the killed daemon; it finds the new one (and stops it after).
    assert embedded_pool.status()["running"]


def test_on_the_embedded_pool_a_job_no_slot_can_run_fails_a_negotiation_cycle_after_it_was_queued(tmp_path,
                                                                                                   user_env):
    """The embedded pool's slots and the catalogue's annexes are every slot there can be: a job none can run
    fails once the negotiator has had a cycle to match it (the embedded pool's: 1 s), not at the idle timeout
    (here 30 minutes), as on a real pool, where such a slot may yet join (tests/conformance)."""
    work = workflow(tmp_path, TOO_BIG)
    started = time.time()
    result = run_snakemake(work, user_env, "big.txt", extra=["--htcannex-idle-timeout", "30m", "--retries", "0"],
                           timeout=120)
    assert result.returncode != 0
    assert time.time() - started < 60
    assert "has been idle for over 1 s, and no slot can run it" in result.stderr, result.stderr[-3000:]
    assert "FAILS (job Requirements) TARGET.Memory >= RequestMemory" in result.stderr
    assert "FAILS (job Requirements) TARGET.Cpus >= RequestCpus" in result.stderr
    assert "FAILS (job Requirements) TARGET.GPUs >= RequestGPUs" in result.stderr
    assert "lower mem_mb" in result.stderr and "The job was removed" in result.stderr


# More jobs than slots, all queued at once: three on the pool's one ordinary slot, and two chunks that the
# rotation (round-robin over a, b, c) puts on annex a, which has one slot. Each waits behind the run's own jobs
# for longer than the idle timeout (3 s), so each is looked at while idle.
QUEUED_BEHIND = ('rule all:\n    input: expand("any{i}.txt", i=range(3)), expand("chunk-run{r}-chunk0.txt", r=(0, 3))\n'
                 'rule any:\n    output: "any{i}.txt"\n    shell: "sleep 4; touch {output}"\n'
                 'rule chunk:\n    output: "chunk-run{run}-chunk{chunk}.txt"\n    shell: "sleep 6; touch {output}"\n')


def test_jobs_queued_behind_the_runs_own_jobs_wait_past_the_idle_timeout(tmp_path, user_env):
    """The local profile queues every ready job (`jobs: unlimited`): a job idle behind busy slots that can run
    it is waiting its turn, not stuck. It is neither failed as unmatchable nor moved off its annex."""
    work = workflow(tmp_path, QUEUED_BEHIND)
    started = time.time()
    result = run_snakemake(work, user_env, extra=["--jobs", "unlimited", "--retries", "0"], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert time.time() - started > 12  # three 4-s jobs one after the other: the last waited over the timeout
    assert "no slot can run it" not in result.stderr and "Moved it" not in result.stderr
    chunks = {job: annexes for job, annexes in annexes_by_job(work).items() if annexes[0] is not None}
    assert sorted(chunks.values()) == [["htcannex-a"], ["htcannex-a"]]
    # Both chunks were queued before annex a was up: it was requested once.
    assert [request["name"] for request in json.loads(annex_ledger(work).read_text())] == ["htcannex-a"]


def test_with_unmatchable_wait_the_job_is_reported_and_stays_until_ctrl_c(tmp_path, user_env, embedded_pool):
    work = workflow(tmp_path, TOO_BIG)
    snakemake = start_snakemake(work, user_env, "big.txt", extra=["--htcannex-unmatchable", "wait"])
    try:
        reported = read_until(snakemake, "It stays queued (htcannex-unmatchable: wait)")
        assert embedded_pool.schedd().query("JobStatus == 1", ["ClusterId"])  # still queued
        snakemake.send_signal(signal.SIGINT)
        rest, _ = snakemake.communicate(timeout=60)
    finally:
        snakemake.kill()
    output = reported + rest
    assert "no slot can run it" in output and "FAILS (job Requirements) TARGET.Memory" in output
    assert "Terminating processes on user request" in output and "Traceback" not in output
    assert embedded_pool.schedd().query("true", ["ClusterId"]) == []  # Ctrl-C removed it


def test_a_refused_job_fails_alone_and_the_jobs_already_running_are_tracked_to_their_end(tmp_path, user_env,
                                                                                        embedded_pool):
    work = workflow(tmp_path, 'rule all:\n    input: "a.txt", "b.txt"\n'
                              'rule a:\n    output: "a.txt"\n    shell: "sleep 4; touch {output}"\n'
                              'rule b:\n    output: "b.txt"\n    resources: htcannex_submit=\'{"+Cmd": "/bin/x"}\'\n'
                              '    shell: "touch {output}"\n')
    result = run_snakemake(work, user_env, extra=["--retries", "0"])
    assert result.returncode != 0
    assert "the escape hatch cannot set job attribute Cmd" in result.stderr
    assert (work / "a.txt").exists()  # a ran to its end and came back
    assert embedded_pool.schedd().query("true", ["ClusterId"]) == []  # nothing left running untracked


@pytest.mark.slow  # about 65 s: a daemon that does not answer within HTCondor's QUERY_TIMEOUT (60 s)
def test_snakemake_on_a_stopped_pool_daemon_ends_with_its_pid_and_the_fix(tmp_path, user_env, embedded_pool):
    work = workflow(tmp_path, 'rule a:\n    output: "a.txt"\n    shell: "echo done > {output}"\n')
    embedded_pool.ensure_running()
    pid = embedded_pool.recorded_pid()
    os.kill(pid, signal.SIGSTOP)  # e.g. a terminal's Ctrl-Z on a daemon started in the foreground
    # HTCondor's QUERY_TIMEOUT (60 s by default), set as for HTCondor's own tools: a request then waits 5 s.
    env = {**user_env, "_CONDOR_QUERY_TIMEOUT": "5"}
    try:
        result = run_snakemake(work, env, "a.txt", timeout=150)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert result.returncode != 0
    assert f"the embedded pool does not answer: the pool daemon (pid {pid})" in result.stderr, result.stderr[-3000:]
    assert f"kill -CONT {pid}" in result.stderr and "Traceback" not in result.stderr
    assert "did not answer within 5 s" in result.stderr
    assert run_snakemake(work, user_env, "a.txt").returncode == 0  # resumed, the same run goes through
