"""What the status thread asks about queued jobs that have not run (held_and_idle.py), once per poll for
all of them, not once per job: a queue submitted together comes due together. Idle jobs are looked at
once per idle timeout, against one collector answer (on a large pool it holds every slot); held jobs
without an event log are asked of the schedd in one query."""
import time
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
    """Every job asked for is idle, or held when `held`; counts the queries."""

    def __init__(self, held=False):
        self.held, self.constraints = held, []

    def query(self, constraint, projection):
        self.constraints.append(constraint)
        ad = classad2.ClassAd({"ClusterId": 1, "ProcId": 0, "Owner": "me", "RequestCpus": 1, "RequestMemory": 512,
                               "JobStatus": 5 if self.held else 1, "HoldReason": "Transfer output files failure",
                               "HoldReasonCode": 12, "HoldReasonSubCode": 13})
        ad["Requirements"] = classad2.ExprTree("TARGET.Cpus >= RequestCpus && TARGET.Memory >= RequestMemory")
        return [ad]


def held_and_idle(schedd, collector, tracker=None):
    runtime = SimpleNamespace(connection=SimpleNamespace(schedd=schedd, collector=collector), idle_timeout_s=0,
                              config=load_catalogue(FAULTS_CATALOGUE), tracker=tracker)
    failed = []
    return HeldAndIdle(runtime, logger=SimpleNamespace(warning=print), unmatchable="fail",
                       fail=lambda *a, **k: failed.append(a), placement_request=None), failed


def queued_jobs(n: int, waiting_since: float | None = None) -> list[SubmittedJobInfo]:
    jobs = [SubmittedJobInfo(SimpleNamespace(name="any", jobid=i), external_jobid=f"{i + 1}.0",
                             aux={"htcannex": TrackedJob(None, None, False, None, None)}) for i in range(n)]
    for job in jobs:
        job.aux["htcannex"].waiting_since = waiting_since or time.time()
    return jobs


def test_idle_jobs_looked_at_in_one_poll_share_one_collector_answer():
    collector = BusySlots()
    waiting, failed = held_and_idle(Queue(), collector)
    jobs = queued_jobs(5)
    for poll in range(3):  # the first poll sees them idle; with a timeout of 0 every later one looks
        waiting.new_poll(jobs)
        assert all(waiting.idle(job) for job in jobs)  # a busy slot that can run them: they wait
    assert collector.queries == 2 and failed == []


def test_held_jobs_without_an_event_log_are_asked_of_the_schedd_in_one_query_per_poll(tmp_path):
    schedd = Queue(held=True)
    waiting, _ = held_and_idle(schedd, BusySlots(), tracker=SimpleNamespace(path=tmp_path / "never-written.log"))
    jobs = queued_jobs(5, waiting_since=time.time() - 60)  # past the grace an event log gets to appear
    for poll in range(2):
        waiting.new_poll(jobs)
        records = [waiting.held_without_event_log(job) for job in jobs]
        assert [record.job_id for record in records if record is not None] == ["1.0"]  # the one held job there
        assert records[0].hold_code == 12 and records[0].hold_subcode == 13
    assert schedd.constraints == ["JobStatus == 5 && member(ClusterId, {1, 2, 3, 4, 5})"] * 2
