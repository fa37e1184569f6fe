"""`htcannex report` of the embedded pool's own event log: the figures match what the test arranged.

Job A waits on hold (code 15, as htcannex holds a job for its annex), takes a self-checkpoint,
is evicted (the pool's fault hook) and resumes from its checkpoint. Job B burns CPU, is held
by the user while running and released. Event times have 1 s steps, so durations are checked
to about a second (the shared CI machine adds scheduling delay, never less time).
"""
import json
import sys
import textwrap
import time

import htcondor2
import pytest

from htcannex_pool import faults
from snakemake_executor_plugin_htcannex.cli import main

SECOND = 1.6  # the log's 1 s steps, at both ends of an interval, plus a little delay


def _script(path, text: str, interpreter: str = "/bin/sh"):
    path.write_text(f"#!{interpreter}\n" + textwrap.dedent(text))
    path.chmod(0o755)


def _wait(predicate, what: str, timeout_s: float = 30):
    deadline = time.time() + timeout_s
    while not predicate():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _status(schedd, cluster: int):
    ads = (schedd.query(f"ClusterId == {cluster}", ["JobStatus"])
           or schedd.history(f"ClusterId == {cluster}", ["JobStatus"], 1))
    return ads[0]["JobStatus"] if ads else None


def test_report_of_a_pool_run_with_hold_eviction_and_checkpoint(embedded_pool, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    schedd = embedded_pool.schedd()
    _script(tmp_path / "ckpt.sh", """\
        step=$(( $(cat step.txt 2>/dev/null || echo 0) + 1 ))
        echo $step > step.txt
        if [ $step -eq 1 ]; then sleep 2; exit 85; fi
        if [ ! -e "$1" ]; then touch "$1"; sleep 60; fi
        sleep 1
        echo $step > result.txt
        """)
    _script(tmp_path / "burn.py", """\
        import time
        start = time.time()
        while time.time() - start < 3:
            pass
        """, sys.executable)
    common = {"log": "jobs.log", "request_cpus": "1", "request_memory": "256MB", "request_disk": "10MB",
              "should_transfer_files": "YES"}
    job_a = schedd.submit(htcondor2.Submit({
        **common, "executable": "ckpt.sh", "arguments": str(tmp_path / "evict-me"), "hold": "true",
        "checkpoint_exit_code": "85", "transfer_checkpoint_files": "step.txt",
        "transfer_output_files": "result.txt"})).cluster()
    time.sleep(3)
    schedd.act(htcondor2.JobAction.Release, f"{job_a}.0")
    _wait(lambda: (tmp_path / "evict-me").exists(), "job A's second step")
    time.sleep(2)
    faults.kill_job(embedded_pool, f"{job_a}.0")

    job_b = schedd.submit(htcondor2.Submit({**common, "executable": "burn.py"})).cluster()
    _wait(lambda: _status(schedd, job_b) == 2, "job B running")
    time.sleep(1)
    schedd.act(htcondor2.JobAction.Hold, f"{job_b}.0", "held by the test")
    time.sleep(2)
    schedd.act(htcondor2.JobAction.Release, f"{job_b}.0")
    for cluster in (job_a, job_b):
        _wait(lambda: _status(schedd, cluster) == 4, f"job {cluster} done")

    out = tmp_path / "report.json"
    assert main(["report", str(tmp_path / "jobs.log"), "--json", str(out)]) == 0
    a, b = json.loads(out.read_text())["jobs"]

    # submitted on hold (code 15): how htcannex waits for an annex
    assert a["state"] == "done" and a["annex_wait_s"] == pytest.approx(3, abs=SECOND)
    assert (a["runs"], a["checkpoints"], a["evictions"], a["holds"]) == (2, 1, 1, 0)
    assert a["badput_s"] == pytest.approx(2, abs=SECOND)  # lost since the checkpoint, not since the start
    assert a["compute_s"] == pytest.approx(2 + 2 + 1, abs=2 * SECOND)
    # the terminated event's resources table, as the pool writes it from the job ad
    assert (a["cpus_requested"], a["memory_requested_mb"], a["disk_requested_kb"]) == (1, 256, 10 * 1024)
    assert a["memory_allocated_mb"] >= 256 and a["memory_peak_mb"] >= 1 and a["disk_used_kb"] >= 1
    assert a["bytes_out"] > 0 and a["bytes_in"] > 0

    assert b["state"] == "done" and (b["runs"], b["holds"], b["evictions"]) == (2, 1, 0)
    assert b["hold_codes"].startswith("1/")  # HoldReasonCode 1: held by a user
    assert b["held_s"] == pytest.approx(2, abs=SECOND)
    assert b["badput_s"] == pytest.approx(1, abs=SECOND)
    assert b["cpu_s"] > 0.5 and b["cpus_used"] > 0
