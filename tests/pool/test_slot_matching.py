"""Annexes and matching: jobs go where TargetAnnexName says, if their Requirements fit."""
import getpass
import time

import htcondor2
import pytest

from htcannex_pool import PoolRequestError
from htcannex_pool.starter import machine_gpus

from pool_helpers import events, job_status, script, submit, wait_for_status, wait_until

OWNER = getpass.getuser()


def annex(pool, name, **overrides):
    pool.create_annex(name, **{"owner": OWNER, "cpus": 2, "memory_mb": 2048, "lifetime_s": 600, **overrides})


# The slot's AnnexName in the execute event, as the executor asks for it (description.py).
ASK_ANNEX = {"ulog_execute_attrs": "AnnexName"}


def execute_event(log, cluster):
    return next(event for event in events(log)
                if event.type == htcondor2.JobEventType.EXECUTE and event.cluster == cluster)


@pytest.mark.skipif(machine_gpus() > 0, reason="this machine has GPUs: the GPU job would run")
def test_jobs_run_on_the_annex_they_target(pool, submit_dir):
    annex(pool, "expanse-a")
    annex(pool, "delta-b", gpus=1, gpu_memory_mb=40960, gpu_capability=8.0)
    script(submit_dir, "job.sh", "exit 0\n")
    to_expanse = submit(pool, {"executable": "job.sh", "MY.TargetAnnexName": '"expanse-a"', **ASK_ANNEX})
    to_delta = submit(pool, {"executable": "job.sh", "MY.TargetAnnexName": '"delta-b"', "request_gpus": "1",
                             "gpus_minimum_memory": "40GB", "gpus_minimum_capability": "7.0", **ASK_ANNEX})
    wait_for_status(pool, f"{to_expanse.cluster()}.0", 4)
    executed = execute_event(submit_dir / "jobs.log", to_expanse.cluster())
    assert executed["SlotName"] == "slot1@expanse-a-host1"
    assert executed["ExecuteProps"]["AnnexName"] == "expanse-a"
    # The GPU job matches delta-b's slot, whose GPU is the site's, not this machine's: held there, not run without it.
    wait_for_status(pool, f"{to_delta.cluster()}.0", 5)
    held = pool.schedd().query(f"ClusterId == {to_delta.cluster()}", ["HoldReason", "HoldReasonCode"])[0]
    assert held["HoldReasonCode"] == 6 and "slot1@delta-b-host1" in held["HoldReason"]
    assert "asks for 1 GPU(s) and this machine has 0" in held["HoldReason"]


def test_job_waits_idle_until_its_annex_exists(pool, submit_dir):
    script(submit_dir, "job.sh", "exit 0\n")
    result = submit(pool, {"executable": "job.sh", "MY.TargetAnnexName": '"later"', **ASK_ANNEX})
    time.sleep(1.0)
    assert job_status(pool, f"{result.cluster()}.0") == 1
    annex(pool, "later", startup_delay_s=0.5)
    assert [a["state"] for a in pool.annexes()] == ["pending"]
    wait_for_status(pool, f"{result.cluster()}.0", 4)
    assert execute_event(submit_dir / "jobs.log", result.cluster())["ExecuteProps"]["AnnexName"] == "later"


def test_annex_that_never_comes_up_keeps_jobs_idle(pool, submit_dir):
    annex(pool, "broken", comes_up=False)
    script(submit_dir, "job.sh", "exit 0\n")
    result = submit(pool, {"executable": "job.sh", "MY.TargetAnnexName": '"broken"'})
    time.sleep(1.0)
    assert job_status(pool, f"{result.cluster()}.0") == 1
    assert pool.collector().query(htcondor2.AdTypes.Startd, 'AnnexName == "broken"') == []


def test_requirements_not_met_stays_idle(pool, submit_dir):
    annex(pool, "small", memory_mb=1024)
    script(submit_dir, "job.sh", "exit 0\n")
    too_big = submit(pool, {"executable": "job.sh", "MY.TargetAnnexName": '"small"', "request_memory": "2GB"})
    fits = submit(pool, {"executable": "job.sh", "MY.TargetAnnexName": '"small"', "request_memory": "1GB"})
    wait_for_status(pool, f"{fits.cluster()}.0", 4)
    assert job_status(pool, f"{too_big.cluster()}.0") == 1


def test_annex_slots_only_take_their_owners_jobs(pool, submit_dir):
    annex(pool, "someone-elses", owner="not-" + OWNER)
    script(submit_dir, "job.sh", "exit 0\n")
    result = submit(pool, {"executable": "job.sh", "MY.TargetAnnexName": '"someone-elses"'})
    time.sleep(1.0)
    assert job_status(pool, f"{result.cluster()}.0") == 1


def test_collector_returns_slot_ads(pool, submit_dir):
    annex(pool, "anvil-c", nodes=2, gpus=2, gpu_memory_mb=16384, gpu_capability=7.0)
    slots = wait_until(lambda: pool.collector().query(htcondor2.AdTypes.Startd, 'AnnexName == "anvil-c"',
                                                      ["Name", "GPUs", "GPUs_GlobalMemoryMb", "Cpus"]),
                       what="the annex's slot ads")
    assert sorted(slot["Name"] for slot in slots) == ["slot1@anvil-c-host1", "slot1@anvil-c-host2"]
    assert all((slot["GPUs"], slot["GPUs_GlobalMemoryMb"], slot["Cpus"]) == (2, 16384, 2) for slot in slots)
    ordinary = pool.collector().query(htcondor2.AdTypes.Startd, "AnnexName is undefined", ["Cpus", "Memory"])
    assert [(slot["Cpus"], slot["Memory"]) for slot in ordinary] == [(2, 4096)]


@pytest.mark.parametrize("name, overrides, message", [
    ("bad name", {}, "name 'bad name' must be letters"),
    ("x", {"cpus": 0}, "cpus must be a positive number"),
    ("x", {"owner": ""}, "owner is required"),
])
def test_bad_annex_requests_are_rejected(pool, name, overrides, message):
    with pytest.raises(PoolRequestError, match=message):
        annex(pool, name, **overrides)
    assert pool.annexes() == []


def test_annex_names_are_unique(pool):
    annex(pool, "once")
    with pytest.raises(PoolRequestError, match="an annex named once already exists"):
        annex(pool, "once")


def test_removing_an_annex_evicts_its_jobs(pool, submit_dir):
    annex(pool, "bridges2-x")
    script(submit_dir, "slow.sh", "sleep 60\n")
    result = submit(pool, {"executable": "slow.sh", "MY.TargetAnnexName": '"bridges2-x"'})
    job_id = f"{result.cluster()}.0"
    wait_for_status(pool, job_id, 2)
    assert pool.status()["jobs"] == {"running": 1}
    pool.remove_annex("bridges2-x")
    assert pool.annexes() == [] and pool.status()["jobs"] == {"idle": 1}
    assert htcondor2.JobEventType.JOB_EVICTED in [event.type for event in events(submit_dir / "jobs.log")]
    with pytest.raises(PoolRequestError, match="no annex named 'bridges2-x'"):
        pool.remove_annex("bridges2-x")
