"""The daemon: persistence across restarts, concurrent clients, bad requests, idle exit, CLI."""
import getpass
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import htcondor2
import psutil
import pytest

from htcannex_pool import PoolRequestError

from pool_helpers import (event_types, make_pool, script, stop_for_sure, submit,
                          wait_for_status, wait_until)

JobEventType = htcondor2.JobEventType


def daemon_pid(pool) -> int:
    return pool.status()["pid"]


def test_restart_keeps_queued_held_and_running_jobs(pool, submit_dir):
    script(submit_dir, "wait.sh", 'echo run >> "$1"; while [ ! -e "$1.go" ]; do sleep 0.1; done\n')
    runs = submit_dir / "runs.txt"
    running = submit(pool, {"executable": "wait.sh", "arguments": str(runs)})
    idle = submit(pool, {"executable": "wait.sh", "arguments": str(runs), "MY.TargetAnnexName": '"not-yet"'})
    held = submit(pool, {"executable": "wait.sh", "arguments": str(runs), "hold": "true"})
    running_id = f"{running.cluster()}.0"
    wait_until(runs.exists, 15, "the running job")
    old_pid = daemon_pid(pool)
    os.kill(old_pid, signal.SIGKILL)  # a crash: no chance to clean up
    wait_until(lambda: not psutil.pid_exists(old_pid) or psutil.Process(old_pid).status() == "zombie", 10, "crash")

    restarted = make_pool(pool.spool_dir)  # a new client, too
    restarted.ensure_running()
    assert daemon_pid(restarted) != old_pid
    queued = {(ad["ClusterId"], ad["JobStatus"]) for ad in restarted.schedd().query("true", ["ClusterId", "JobStatus"])}
    assert (idle.cluster(), 1) in queued and (held.cluster(), 5) in queued
    wait_until(lambda: len(runs.read_text().split()) == 2, 15, "the evicted job to run again")
    assert JobEventType.JOB_EVICTED in event_types(submit_dir / "jobs.log", running_id)
    (submit_dir / "runs.txt.go").touch()
    wait_for_status(restarted, running_id, 4)


def test_stop_evicts_running_jobs_and_start_runs_them_again(pool, submit_dir):
    script(submit_dir, "wait.sh", 'echo run >> "$1"; while [ ! -e "$1.go" ]; do sleep 0.1; done\n')
    runs = submit_dir / "runs.txt"
    result = submit(pool, {"executable": "wait.sh", "arguments": str(runs)})
    wait_until(runs.exists, 15, "the job to run")
    pool.stop()
    assert not pool.status()["running"]
    pool.ensure_running()
    wait_until(lambda: len(runs.read_text().split()) == 2, 15, "the job to run again")
    (submit_dir / "runs.txt.go").touch()
    wait_for_status(pool, f"{result.cluster()}.0", 4)


def test_daemon_and_jobs_outlive_a_killed_client(spool, submit_dir):
    script(submit_dir, "wait.sh", 'echo started > "$1"; sleep 60\n')
    client = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""\
        import sys, time, htcondor2
        sys.path[:0] = [{str(os.path.dirname(__file__))!r}, {str(os.path.dirname(os.path.dirname(__file__)))!r}]
        from pool_helpers import make_pool
        pool = make_pool({str(spool)!r})
        pool.schedd().submit(htcondor2.Submit({{"executable": "wait.sh", "arguments": {str(submit_dir / 'mark')!r}}}))
        print("submitted", flush=True)
        time.sleep(60)
        """)], cwd=submit_dir, stdout=subprocess.PIPE, text=True)
    pool = make_pool(spool)
    try:
        assert client.stdout.readline().strip() == "submitted"
        wait_until((submit_dir / "mark").exists, 15, "the job to start")
        client.send_signal(signal.SIGKILL)
        client.wait()
        time.sleep(0.5)
        assert pool.status()["running"]
        assert pool.schedd().query("true", ["JobStatus"])[0]["JobStatus"] == 2
    finally:
        client.kill()
        client.stdout.close()
        stop_for_sure(pool)


def test_two_clients_at_once_start_one_daemon_and_queue_all_jobs(spool, submit_dir):
    script(submit_dir, "job.sh", "exit 0\n")
    client_code = textwrap.dedent(f"""\
        import sys, htcondor2
        sys.path[:0] = [{str(os.path.dirname(__file__))!r}, {str(os.path.dirname(os.path.dirname(__file__)))!r}]
        from pool_helpers import make_pool
        schedd = make_pool({str(spool)!r}).schedd()
        for _ in range(50):
            schedd.submit(htcondor2.Submit({{"executable": "job.sh", "MY.TargetAnnexName": '"none"'}}))
        """)
    clients = [subprocess.Popen([sys.executable, "-c", client_code], cwd=submit_dir) for _ in range(2)]
    pool = make_pool(spool)
    try:
        assert [client.wait(timeout=120) for client in clients] == [0, 0]
        ads = pool.schedd().query("true", ["ClusterId", "ProcId", "JobStatus"])
        ids = {(ad["ClusterId"], ad["ProcId"]) for ad in ads}
        assert len(ads) == 100 and len(ids) == 100
        assert {ad["JobStatus"] for ad in ads} == {1}
        command_lines = [" ".join(process.info["cmdline"] or []) for process in psutil.process_iter(["cmdline"])]
        daemons = [line for line in command_lines if "pool.daemon" in line and str(spool) in line]
        assert len(daemons) == 1
    finally:
        stop_for_sure(pool)


@pytest.mark.parametrize("call, message", [
    (lambda schedd: schedd.edit("999.0", "Foo", "1"), "job 999.0 is not in the queue"),
    (lambda schedd: schedd.edit("999", "Foo", "1"), "cluster 999 has no jobs"),
    (lambda schedd: schedd.act(htcondor2.JobAction.Suspend, "1.0"), "'Suspend' is not supported"),
    (lambda schedd: schedd.query("JobStatus == = 1"), "malformed constraint"),
    (lambda schedd: schedd.edit("true", "JobStatus", "4"), "JobStatus is managed by the schedd"),
    (lambda schedd: schedd.edit("true", "Foo", "= broken"), "is not a ClassAd expression"),
])
def test_bad_requests_get_clear_errors_and_the_daemon_keeps_serving(pool, submit_dir, call, message):
    script(submit_dir, "job.sh", "exit 0\n")
    queued = submit(pool, {"executable": "job.sh", "hold": "true"})
    with pytest.raises(PoolRequestError, match=message):
        call(pool.schedd())
    assert [ad["ClusterId"] for ad in pool.schedd().query("true", ["ClusterId"])] == [queued.cluster()]


def test_malformed_wire_requests_fail_only_that_client(pool):
    for garbage in (b"not json\n", b"[1, 2]\n", b'{"op": "no_such_op"}\n', b'{"op": "query", "args": {"bogus": 1}}\n'):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.connect(str(pool.socket_path))
            connection.sendall(garbage)
            answer = json.loads(connection.makefile("rb").readline())
        assert answer["ok"] is False and answer["error"]
    assert pool.status()["running"]


def test_edit_retargets_an_idle_job(pool, submit_dir):
    pool.create_annex("bridges2-a", owner=getpass.getuser(), cpus=1, memory_mb=1024, lifetime_s=600)
    script(submit_dir, "job.sh", "exit 0\n")
    result = submit(pool, {"executable": "job.sh", "MY.TargetAnnexName": '"gone"'})
    assert pool.schedd().edit(f"{result.cluster()}.0", "TargetAnnexName", '"bridges2-a"') == 1
    wait_for_status(pool, f"{result.cluster()}.0", 4)


def test_daemon_exits_when_idle_and_the_next_call_starts_it_again(spool, submit_dir):
    pool = make_pool(spool, idle_exit_s=0.5)
    pool.ensure_running()
    try:
        wait_until(lambda: not pool.status()["running"], 10, "the idle daemon to exit")
        script(submit_dir, "job.sh", "exit 0\n")
        result = submit(pool, {"executable": "job.sh"})
        wait_for_status(pool, f"{result.cluster()}.0", 4)
    finally:
        stop_for_sure(pool)


def test_cli_start_status_stop(spool):
    def htcannex(*args):
        return subprocess.run([sys.executable, "-m", "snakemake_executor_plugin_htcannex.cli", "pool", *args,
                               "--spool", str(spool), "--idle-exit", "60"], capture_output=True, text=True)
    try:
        assert htcannex("start").returncode == 0
        status = htcannex("status")
        assert status.returncode == 0 and json.loads(status.stdout)["running"] is True
        assert htcannex("stop").returncode == 0
        stopped = htcannex("status")
        assert stopped.returncode == 3 and json.loads(stopped.stdout)["running"] is False
    finally:
        stop_for_sure(make_pool(spool))


@pytest.mark.parametrize("slots, message", [
    ([{"cpus": 2}], "slot 0 needs memory_mb"),
    ([{"cpus": 1, "memory_mb": 100}, {"cpus": "2", "memory_mb": 100}], "slot 1 needs cpus"),
    ([{"cpus": 1, "memory_mb": 100, "transfer_methods": ["osdf"]}], "slot 0's transfer_methods must be a string"),
])
def test_bad_ordinary_slots_are_refused_before_starting(spool, slots, message):
    with pytest.raises(PoolRequestError, match=message):
        make_pool(spool, slots=slots)


def test_a_stopped_daemon_is_an_error_naming_it_not_a_client_blocked_for_good(spool, monkeypatch):
    monkeypatch.setattr("htcannex_pool.client.ANSWER_TIMEOUT_S", 1.0)  # HTCondor's 60 s, shortened
    pool = make_pool(spool)
    pool.ensure_running()
    pid = daemon_pid(pool)
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: psutil.Process(pid).status() == psutil.STATUS_STOPPED, 10, "the daemon stopped")
        started = time.time()
        with pytest.raises(htcondor2.HTCondorException, match=rf"daemon \(pid {pid}\).*did not answer within 1 s"):
            pool.schedd().query("true", ["ClusterId"])
        assert time.time() - started < 10
    finally:
        os.kill(pid, signal.SIGCONT)
    assert pool.schedd().query("true", ["ClusterId"]) == []  # answered again once resumed
    stop_for_sure(pool)
