"""Policies real pools apply, and the fault injection hooks that exercise them."""
import getpass
import time

import htcondor2
import pytest

from htcannex_pool import PoolRequestError, faults

from snakemake_executor_plugin_htcannex.track.holds import Hold

from pool_helpers import (event_types, events, job_status, make_pool, python_script, script, stop_for_sure,
                          submit, wait_for_status, wait_until)

JobEventType = htcondor2.JobEventType
OWNER = getpass.getuser()


def held_events(log, cluster):
    return [event for event in events(log) if event.type == JobEventType.JOB_HELD and event.cluster == cluster]


def test_memory_overuse_holds_and_periodic_release_retries(pool, submit_dir):
    python_script(submit_dir, "hog.py", """\
        import time
        hog = b"x" * (300 * 2**20)
        time.sleep(60)
        """)
    result = submit(pool, {"executable": "hog.py", "request_memory": "100MB",
                           "periodic_release": "HoldReasonCode == 34 && NumJobStarts < 3"})
    job_id = f"{result.cluster()}.0"
    log = submit_dir / "jobs.log"
    wait_until(lambda: len(held_events(log, result.cluster())) == 3, 30, "three memory holds")
    time.sleep(1.5)  # past a periodic evaluation: NumJobStarts == 3 now keeps it held
    ad = pool.schedd().query(f"ClusterId == {result.cluster()}", ["JobStatus", "NumJobStarts"])[0]
    assert (ad["JobStatus"], ad["NumJobStarts"]) == (5, 3)
    held = held_events(log, result.cluster())[0]
    assert (held["HoldReasonCode"], held["HoldReasonSubCode"]) == (34, 102)
    assert held["HoldReason"].startswith("Job has gone over cgroup memory limit of 100 megabytes.")
    assert event_types(log, job_id).count(JobEventType.JOB_RELEASED) == 2
    assert JobEventType.IMAGE_SIZE in event_types(log, job_id)


HOG = """\
    import time
    hog = b"x" * (300 * 2**20)
    time.sleep(60)
    """


@pytest.mark.parametrize("config, code, subcode, reason", [
    # a schedd's SYSTEM_PERIODIC_HOLD where cgroups do not enforce memory (as on a personal pool with unprivileged startds)
    ({"CGROUP_MEMORY_LIMIT_POLICY": "none",
      "SYSTEM_PERIODIC_HOLD": "JobStatus == 2 && MemoryUsage =!= undefined && MemoryUsage > RequestMemory",
      "SYSTEM_PERIODIC_HOLD_REASON": 'strcat("memory usage ", MemoryUsage, " MB exceeded request_memory ", '
                                     'RequestMemory, " MB")'},
     26, 0, "memory usage "),
    # the same without a reason: HTCondor's default words, subcode as configured
    ({"CGROUP_MEMORY_LIMIT_POLICY": "none", "SYSTEM_PERIODIC_HOLD_SUBCODE": "7",
      "SYSTEM_PERIODIC_HOLD": "MemoryUsage > RequestMemory"},
     26, 7, "The system macro SYSTEM_PERIODIC_HOLD expression 'MemoryUsage > RequestMemory' evaluated to TRUE"),
    # the same on an execute point without per-job cgroups (the realpool's): judged at the procd's snapshots
    ({"BASE_CGROUP": "", "PID_SNAPSHOT_INTERVAL": "1", "SYSTEM_PERIODIC_HOLD": "MemoryUsage > RequestMemory"},
     26, 0, "The system macro SYSTEM_PERIODIC_HOLD expression 'MemoryUsage > RequestMemory' evaluated to TRUE"),
    # an execute point's PREEMPT + WANT_HOLD
    ({"CGROUP_MEMORY_LIMIT_POLICY": "none", "PREEMPT": "TARGET.MemoryUsage > TARGET.RequestMemory",
      "WANT_HOLD": "true", "WANT_HOLD_SUBCODE": "102"},
     21, 102, "The startd put this job on hold.  (At preemption time, WANT_HOLD evaluated to true"),
])
def test_memory_overuse_held_as_the_pool_is_configured(spool, submit_dir, config, code, subcode, reason):
    pool = make_pool(spool, config=config)
    try:
        python_script(submit_dir, "hog.py", HOG)
        result = submit(pool, {"executable": "hog.py", "request_memory": "100MB"})
        wait_until(lambda: held_events(submit_dir / "jobs.log", result.cluster()), 30, "a memory hold")
        [held] = held_events(submit_dir / "jobs.log", result.cluster())
        assert (held["HoldReasonCode"], held["HoldReasonSubCode"]) == (code, subcode)
        assert held["HoldReason"].startswith(reason)
        assert Hold(code, subcode, held["HoldReason"]).needs_more_memory
    finally:
        stop_for_sure(pool)


def test_without_cgroups_no_cgroup_limit_holds_a_job(spool, submit_dir):
    # CGROUP_MEMORY_LIMIT_POLICY = hard (the default) needs a cgroup to enforce it (BASE_CGROUP empty: none).
    pool = make_pool(spool, config={"BASE_CGROUP": "", "PID_SNAPSHOT_INTERVAL": 0.5})
    try:
        python_script(submit_dir, "hog.py", HOG.replace("time.sleep(60)", "time.sleep(2)"))
        result = submit(pool, {"executable": "hog.py", "request_memory": "100MB"})
        job_id = f"{result.cluster()}.0"
        wait_for_status(pool, job_id, 4)
        assert not held_events(submit_dir / "jobs.log", result.cluster())
        # what the snapshots saw: the 300 MB the job held for 2 s, 0.5 s apart
        assert JobEventType.IMAGE_SIZE in event_types(submit_dir / "jobs.log", job_id)
        [ad] = pool.schedd().history(f"ClusterId == {result.cluster()}", ["ResidentSetSize_RAW"], 1)
        assert ad["ResidentSetSize_RAW"] > 300 * 1024
    finally:
        stop_for_sure(pool)


def test_an_annex_gives_no_per_job_cgroup_unless_created_with_one(pool, submit_dir):
    # `htcondor annex create`'s pilot runs HTCondor as the user: no per-job cgroup, so no cgroup limit holds
    # a job over its request there, and its memory is what the procd's snapshots saw (one at its start, then
    # every PID_SNAPSHOT_INTERVAL, 15 s): the 300 MB it holds from its first second are missed.
    pool.create_annex("pilot", owner=OWNER, cpus=1, memory_mb=1024, lifetime_s=600)
    pool.create_annex("privileged", owner=OWNER, cpus=1, memory_mb=1024, lifetime_s=600, cgroups=True)
    python_script(submit_dir, "hog.py", HOG.replace("hog =", "time.sleep(1); hog =").replace("sleep(60)", "sleep(3)"))
    jobs = {}
    for annex in ("pilot", "privileged"):
        result = submit(pool, {"executable": "hog.py", "request_memory": "100MB", "MY.TargetAnnexName": f'"{annex}"'})
        jobs[annex] = f"{result.cluster()}.0"
    wait_for_status(pool, jobs["pilot"], 4)
    wait_for_status(pool, jobs["privileged"], 5)
    log = submit_dir / "jobs.log"
    [held] = [event for event in events(log) if event.type == JobEventType.JOB_HELD]
    assert f"{held.cluster}.{held.proc}" == jobs["privileged"]
    assert (held["HoldReasonCode"], held["HoldReasonSubCode"]) == (34, 102)
    [ad] = pool.schedd().history(f'ClusterId == {jobs["pilot"].split(".")[0]}', ["ResidentSetSize_RAW"], 1)
    assert ad["ResidentSetSize_RAW"] < 100 * 1024


def test_an_annex_job_over_its_batch_allocation_is_killed_by_sigkill_and_not_held(pool, submit_dir):
    # The annex's node is its pilot's batch job, whose memory the batch system's out-of-memory killer enforces:
    # the job's largest process gets SIGKILL, HTCondor holds nothing (no per-job cgroup) and logs the signal.
    pool.create_annex("small", owner=OWNER, cpus=1, memory_mb=256, lifetime_s=600)
    python_script(submit_dir, "hog.py", HOG)
    result = submit(pool, {"executable": "hog.py", "request_memory": "100MB", "MY.TargetAnnexName": '"small"'})
    job_id = f"{result.cluster()}.0"
    wait_for_status(pool, job_id, 4)
    log = submit_dir / "jobs.log"
    assert not held_events(log, result.cluster())
    [terminated] = [event for event in events(log) if event.type == JobEventType.JOB_TERMINATED]
    assert (terminated["TerminatedNormally"], terminated["TerminatedBySignal"]) == (False, 9)


@pytest.mark.parametrize("config, message", [
    ({"CGROUP_MEMORY_LIMIT_POLICY": "soft"}, "CGROUP_MEMORY_LIMIT_POLICY = 'soft'; use one of hard, none"),
    ({"PID_SNAPSHOT_INTERVAL": "15s"}, "PID_SNAPSHOT_INTERVAL = '15s'; use a number of seconds above 0"),
    ({"PID_SNAPSHOT_INTERVAL": 0}, "PID_SNAPSHOT_INTERVAL = 0; use a number of seconds above 0"),
    ({"SYSTEM_PERIODIC_HOLDS": "true"}, "unknown macro.*SYSTEM_PERIODIC_HOLDS"),
])
def test_bad_pool_config_names_the_macro(spool, config, message):
    with pytest.raises(PoolRequestError, match=message):
        make_pool(spool, config=config)


def test_transfer_failures_hold_with_htcondor_codes(pool, submit_dir):
    script(submit_dir, "job.sh", "exit 0\n")
    missing_input = submit(pool, {"executable": "job.sh", "transfer_input_files": "absent.txt"})
    missing_output = submit(pool, {"executable": "job.sh", "transfer_output_files": "never_written.txt"})
    for result, code in ((missing_input, 13), (missing_output, 12)):
        wait_for_status(pool, f"{result.cluster()}.0", 5)
        held = held_events(submit_dir / "jobs.log", result.cluster())[0]
        assert held["HoldReasonCode"] == code
        assert ("absent.txt" if code == 13 else "never_written.txt") in held["HoldReason"]


def test_injected_transfer_failure_holds_the_next_job_only(pool, submit_dir):
    script(submit_dir, "job.sh", "exit 0\n")
    faults.fail_next_transfer(pool)
    failed = submit(pool, {"executable": "job.sh"})
    wait_for_status(pool, f"{failed.cluster()}.0", 5)
    assert held_events(submit_dir / "jobs.log", failed.cluster())[0]["HoldReasonCode"] == 13
    fine = submit(pool, {"executable": "job.sh"})
    wait_for_status(pool, f"{fine.cluster()}.0", 4)


def test_annex_lifetime_expiry_evicts_running_jobs(pool, submit_dir):
    pool.create_annex("short", owner=OWNER, cpus=1, memory_mb=1024, lifetime_s=1.5)
    script(submit_dir, "job.sh", "sleep 60\n")
    result = submit(pool, {"executable": "job.sh", "MY.TargetAnnexName": '"short"'})
    job_id = f"{result.cluster()}.0"
    wait_for_status(pool, job_id, 2)
    wait_until(lambda: JobEventType.JOB_EVICTED in event_types(submit_dir / "jobs.log", job_id), 10, "eviction")
    assert job_status(pool, job_id) == 1
    assert [a["state"] for a in pool.annexes()] == ["expired"]
    assert pool.collector().query(htcondor2.AdTypes.Startd, 'AnnexName == "short"') == []


def test_injected_annex_expiry_and_a_new_annex_takes_the_job(pool, submit_dir):
    pool.create_annex("hop", owner=OWNER, cpus=1, memory_mb=1024, lifetime_s=600)
    python_script(submit_dir, "job.py", """\
        import os, sys, time
        open(sys.argv[1], "a").write(os.environ["_CONDOR_SLOT"] + "\\n")
        time.sleep(60 if not os.path.exists(sys.argv[1] + ".second") else 0)
        """)
    runs = submit_dir / "runs.txt"
    result = submit(pool, {"executable": "job.py", "arguments": str(runs), "MY.TargetAnnexName": '"hop"'})
    job_id = f"{result.cluster()}.0"
    wait_until(runs.exists, 15, "the first run")
    (submit_dir / "runs.txt.second").touch()
    faults.expire_annex(pool, "hop")
    assert job_status(pool, job_id) == 1
    pool.create_annex("hop", owner=OWNER, cpus=1, memory_mb=1024, lifetime_s=600)
    wait_for_status(pool, job_id, 4)
    assert runs.read_text().split() == ["slot1", "slot1"]
    assert event_types(submit_dir / "jobs.log", job_id).count(JobEventType.EXECUTE) == 2


def test_self_checkpointing_job_resumes_from_its_checkpoint(pool, submit_dir):
    # Each run appends the step it reached; exit 85 asks for a checkpoint and a restart.
    script(submit_dir, "ckpt.sh", """\
        step=$(( $(cat step.txt 2>/dev/null || echo 0) + 1 ))
        echo $step > step.txt
        echo $step >> "$1"
        if [ $step -eq 1 ]; then exit 85; fi
        if [ $step -eq 2 ] && [ ! -e "$1.killed" ]; then touch "$1.killed"; sleep 60; fi
        echo $step > result.txt
        """)
    runs = submit_dir / "runs.txt"
    result = submit(pool, {"executable": "ckpt.sh", "arguments": str(runs), "checkpoint_exit_code": "85",
                           "transfer_checkpoint_files": "step.txt", "transfer_output_files": "result.txt"})
    job_id = f"{result.cluster()}.0"
    wait_until(lambda: (submit_dir / "runs.txt.killed").exists(), 15, "the second run")
    faults.kill_job(pool, job_id)
    wait_for_status(pool, job_id, 4)
    # After the kill the job restarts from the checkpoint (step 1), not from scratch.
    assert runs.read_text().split() == ["1", "2", "2"]
    assert (submit_dir / "result.txt").read_text() == "2\n"
    assert JobEventType.JOB_EVICTED in event_types(submit_dir / "jobs.log", job_id)


def test_max_retries_reruns_failures_then_gives_up(pool, submit_dir):
    script(submit_dir, "fail.sh", 'echo run >> "$1"; exit 7\n')
    runs = submit_dir / "runs.txt"
    result = submit(pool, {"executable": "fail.sh", "arguments": str(runs), "max_retries": "2"})
    job_id = f"{result.cluster()}.0"
    wait_for_status(pool, job_id, 4, timeout_s=30)
    assert len(runs.read_text().split()) == 3
    job_events = [event for event in events(submit_dir / "jobs.log") if event.cluster == result.cluster()]
    requeued = [event for event in job_events if event.type == JobEventType.JOB_EVICTED]
    assert len(requeued) == 2 and all(event["TerminatedAndRequeued"] for event in requeued)
    assert job_events[-1].type == JobEventType.JOB_TERMINATED and job_events[-1]["ReturnValue"] == 7


def test_allowed_execute_duration_holds_with_code_47(pool, submit_dir):
    script(submit_dir, "slow.sh", "sleep 60\n")
    result = submit(pool, {"executable": "slow.sh", "allowed_execute_duration": "1"})
    wait_for_status(pool, f"{result.cluster()}.0", 5)
    held = held_events(submit_dir / "jobs.log", result.cluster())[0]
    assert held["HoldReasonCode"] == 47 and "allowed execute duration" in held["HoldReason"]


def test_hold_at_submit_then_release_runs_the_job(pool, submit_dir):
    script(submit_dir, "job.sh", "exit 0\n")
    result = submit(pool, {"executable": "job.sh", "hold": "true"})
    job_id = f"{result.cluster()}.0"
    # SubmittedOnHold in the ad, as condor_submit sets it (src/condor_utils/submit_utils.cpp), and no
    # held event in the log (a real 25.14.0 schedd logs only the submit)
    ad = pool.schedd().query(f"ClusterId == {result.cluster()}", ["JobStatus", "HoldReasonCode"])[0]
    assert (ad["JobStatus"], ad["HoldReasonCode"]) == (5, 15)
    time.sleep(0.5)
    assert held_events(submit_dir / "jobs.log", result.cluster()) == []
    assert job_status(pool, job_id) == 5
    pool.schedd().act(htcondor2.JobAction.Release, job_id, "annex is up")
    wait_for_status(pool, job_id, 4)
    released = [event for event in events(submit_dir / "jobs.log") if event.type == JobEventType.JOB_RELEASED]
    assert released[0]["Reason"] == "annex is up"


def test_hold_and_remove_a_running_job(pool, submit_dir):
    script(submit_dir, "slow.sh", "sleep 60\n")
    result = submit(pool, {"executable": "slow.sh"})
    job_id = f"{result.cluster()}.0"
    wait_for_status(pool, job_id, 2)
    answer = pool.schedd().act(htcondor2.JobAction.Hold, [job_id], "operator says wait")
    assert answer["TotalSuccess"] == 1
    assert job_status(pool, job_id) == 5
    pool.schedd().act(htcondor2.JobAction.Remove, f"ClusterId == {result.cluster()}", "no longer needed")
    assert job_status(pool, job_id) == 3
    aborted = [event for event in events(submit_dir / "jobs.log") if event.type == JobEventType.JOB_ABORTED]
    assert aborted[0]["Reason"] == "no longer needed"


def start_a_job_that_finishes_when_run_twice(pool, submit_dir):
    """A job whose first run blocks (until evicted) and whose second run finishes at once;
    each run appends a line to the returned file. Returns once the first run is going."""
    script(submit_dir, "job.sh", 'echo run >> "$1"; [ -e "$1.again" ] || { touch "$1.again"; sleep 60; }\n')
    runs = submit_dir / "runs.txt"
    result = submit(pool, {"executable": "job.sh", "arguments": str(runs)})
    job_id = f"{result.cluster()}.0"
    wait_until(lambda: (submit_dir / "runs.txt.again").exists(), 15, "the first run")
    return job_id, runs


def test_injected_kill_evicts_and_the_job_runs_again(pool, submit_dir):
    job_id, runs = start_a_job_that_finishes_when_run_twice(pool, submit_dir)
    faults.kill_job(pool, job_id)
    wait_for_status(pool, job_id, 4)
    assert len(runs.read_text().split()) == 2
    types = event_types(submit_dir / "jobs.log", job_id)
    assert types.count(JobEventType.EXECUTE) == 2 and JobEventType.JOB_EVICTED in types


def test_periodic_remove(pool, submit_dir):
    script(submit_dir, "job.sh", "exit 0\n")
    result = submit(pool, {"executable": "job.sh", "hold": "true", "periodic_remove": "JobStatus == 5"})
    wait_for_status(pool, f"{result.cluster()}.0", 3, timeout_s=10)
    aborted = [event for event in events(submit_dir / "jobs.log") if event.type == JobEventType.JOB_ABORTED]
    assert "PeriodicRemove" in aborted[0]["Reason"]


def test_kill_injection_names_what_is_wrong(pool, submit_dir):
    script(submit_dir, "job.sh", "exit 0\n")
    held = submit(pool, {"executable": "job.sh", "hold": "true"})
    for job_id, message in (("x", "is not a job id"), ("99.0", "job 99.0 is not in the queue"),
                            (f"{held.cluster()}.0", "is not running")):
        with pytest.raises(PoolRequestError, match=message):
            faults.kill_job(pool, job_id)


def test_periodic_hold_holds_a_running_job_with_code_3(pool, submit_dir):
    script(submit_dir, "slow.sh", "sleep 60\n")
    result = submit(pool, {"executable": "slow.sh", "periodic_hold": "JobStatus == 2"})
    wait_for_status(pool, f"{result.cluster()}.0", 5, timeout_s=10)
    held = held_events(submit_dir / "jobs.log", result.cluster())[0]
    assert held["HoldReasonCode"] == 3 and "PeriodicHold" in held["HoldReason"]


def test_vacate_sends_a_running_job_back_to_idle_and_it_runs_again(pool, submit_dir):
    job_id, runs = start_a_job_that_finishes_when_run_twice(pool, submit_dir)
    assert pool.schedd().act(htcondor2.JobAction.Vacate, job_id)["TotalSuccess"] == 1
    wait_for_status(pool, job_id, 4)
    assert len(runs.read_text().split()) == 2
    assert JobEventType.JOB_EVICTED in event_types(submit_dir / "jobs.log", job_id)
