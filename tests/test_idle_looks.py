"""Idle jobs are looked at once per idle timeout (held_and_idle.py). Jobs queued together come due
together: the collector is asked once per status poll for all of them, not once per job (on a large
pool each answer holds every slot)."""
from pathlib import Path
from types import SimpleNamespace

import classad2
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo

from snakemake_executor_plugin_htcannex.catalogue import load_catalogue
from snakemake_executor_plugin_htcannex.held_and_idle import HeldAndIdle
from snakemake_executor_plugin_htcannex.tracked_job import TrackedJob

FAULTS_CATALOGUE = Path(__file__).parent / "ops" / "workflows" / "faults" / "htcannex.yaml"


class BusySlots:
    """A collector whose one slot is busy with another job and could run these: counts the queries."""

    def __init__(self):
        self.queries = 0

    def query(self, ad_type, constraint, projection):
        self.queries += 1
        return [classad2.ClassAd({"Name": "slot1@host", "Cpus": 1, "Memory": 2048, "State": "Claimed"})]


class Queue:
    def query(self, constraint, projection):
        ad = classad2.ClassAd({"ClusterId": 1, "ProcId": 0, "Owner": "me", "RequestCpus": 1, "RequestMemory": 512})
        ad["Requirements"] = classad2.ExprTree("TARGET.Cpus >= RequestCpus && TARGET.Memory >= RequestMemory")
        return [ad]


def test_idle_jobs_looked_at_in_one_poll_share_one_collector_answer():
    collector = BusySlots()
    runtime = SimpleNamespace(connection=SimpleNamespace(schedd=Queue(), collector=collector), idle_timeout_s=0,
                              config=load_catalogue(FAULTS_CATALOGUE))
    failed = []
    held_and_idle = HeldAndIdle(runtime, logger=None, unmatchable="fail", fail=lambda *a, **k: failed.append(a),
                                placement_request=None)
    jobs = [SubmittedJobInfo(SimpleNamespace(name="any", jobid=i), external_jobid=f"{i}.0",
                             aux={"htcannex": TrackedJob(None, None, False, None, None)}) for i in range(5)]
    for poll in range(3):  # the first poll sees them idle; with a timeout of 0 every later one looks
        held_and_idle.new_poll()
        assert all(held_and_idle.idle(job) for job in jobs)  # a busy slot that can run them: they wait
    assert collector.queries == 2 and failed == []
