"""What the status thread asks about queued jobs that have not run (waiting.py), once per poll for
all of them, not once per job: a queue submitted together comes due together. Idle jobs are looked at
once per idle timeout, against one collector answer (on a large pool it holds every slot); held jobs
without an event log are asked of the schedd in one query."""
import re
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import classad2
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo

from snakemake_executor_plugin_htcannex.sites.catalogue import load_catalogue
from snakemake_executor_plugin_htcannex.submit.description import JobSpec
from snakemake_executor_plugin_htcannex.waiting import HeldAndIdle
from snakemake_executor_plugin_htcannex.sites.site import ResourceRequest
from snakemake_executor_plugin_htcannex.track.tracked_job import TrackedJob, WaitingOn
from snakemake_executor_plugin_htcannex.track.event_log import JobPhase

FAULTS_CATALOGUE = Path(__file__).parent / "ops" / "workflows" / "faults" / "htcannex.yaml"


class BusySlots:
    """A collector whose one slot is busy with another job and could run these: counts the queries."""

    def __init__(self):
        self.queries = 0

    def query(self, ad_type, constraint, projection):
        self.queries += 1
        return [classad2.ClassAd({"Name": "slot1@host", "Cpus": 1, "Memory": 2048, "State": "Claimed"})]


class Queue:
    """Job 1.0 is held when `held`, every other job asked for is idle; keeps the queries."""

    def __init__(self, held=False, memory_mb=512):
        self.held, self.memory_mb, self.constraints, self.reschedules = held, memory_mb, [], 0

    def reschedule(self):
        self.reschedules += 1

    def query(self, constraint, projection):
        self.constraints.append(constraint)
        clusters = [int(cluster) for cluster in re.search(r"member\(ClusterId, \{(.*)\}\)", constraint)[1].split(",")]
        statuses = [int(status) for status in re.match(r"member\(JobStatus, \{(.*?)\}\)", constraint)[1].split(",")]
        ads = []
        for cluster in clusters:
            ad = classad2.ClassAd({"ClusterId": cluster, "ProcId": 0, "Owner": "me", "RequestCpus": 1,
                                   "RequestMemory": self.memory_mb, "JobStatus": 5 if self.held and cluster == 1 else 1,
                                   "HoldReason": "Transfer output files failure", "HoldReasonCode": 12,
                                   "HoldReasonSubCode": 13})
            ad["Requirements"] = classad2.ExprTree("TARGET.Cpus >= RequestCpus && TARGET.Memory >= RequestMemory")
            if ad["JobStatus"] in statuses:
                ads.append(ad)
        return ads


def held_and_idle(schedd, collector, tracker=None, idle_timeout_s=0, negotiation_interval_s=60, warnings=None):
    runtime = SimpleNamespace(connection=SimpleNamespace(schedd=schedd, collector=collector, embedded=False,
                                                         negotiation_interval_s=negotiation_interval_s),
                              idle_timeout_s=idle_timeout_s, config=load_catalogue(FAULTS_CATALOGUE), tracker=tracker,
                              submit_options=SimpleNamespace(workdir=Path(tempfile.mkdtemp())))
    failed = []
    logger = SimpleNamespace(warning=print if warnings is None else warnings.append)
    return HeldAndIdle(runtime, logger=logger, unmatchable="fail",
                       fail=lambda *a, **k: failed.append(a)), failed


def queued_jobs(n: int, submitted: float | None = None) -> list[SubmittedJobInfo]:
    jobs = [SubmittedJobInfo(SimpleNamespace(name="any", jobid=i), external_jobid=f"{i + 1}.0",
                             aux={"htcannex": TrackedJob(JobSpec("any", i, ["/bin/true"], resources={"mem_mb": 512}),
                                                         None, WaitingOn.NOTHING, None, None,
                                                         admitted=ResourceRequest(memory_mb=512))})
            for i in range(n)]
    for job in jobs:
        # Queued then: the time of its submit, and of the wait it began.
        job.aux["htcannex"].submitted = job.aux["htcannex"].since = submitted or time.time()
    return jobs


def test_idle_jobs_looked_at_in_one_poll_share_one_collector_answer_and_one_schedd_query():
    collector, schedd = BusySlots(), Queue()
    waiting, failed = held_and_idle(schedd, collector)
    jobs = queued_jobs(5)
    for poll in range(3):  # the first poll sees them idle; with a timeout of 0 every later one looks
        waiting.new_poll(jobs)
        assert all(waiting.idle(job) for job in jobs)  # a busy slot that can run them: they wait
    assert collector.queries == 2 and failed == []
    assert schedd.constraints == ["member(JobStatus, {1}) && member(ClusterId, {1, 2, 3, 4, 5})"] * 2


def test_a_polls_idle_looks_ask_the_schedd_only_for_the_jobs_due_a_look():
    """Jobs that come due one poll after another do not each make a poll ask for the whole queue's ads."""
    schedd = Queue()
    waiting, _ = held_and_idle(schedd, BusySlots(), idle_timeout_s=60)
    jobs = queued_jobs(5)
    waiting.new_poll(jobs)
    assert all(waiting.idle(job) for job in jobs)  # seen idle now: none due
    for job in jobs[:2]:
        job.aux["htcannex"].since -= 120  # these two were seen idle two minutes ago
    waiting.new_poll(jobs)
    assert all(waiting.idle(job) for job in jobs)
    assert schedd.constraints == ["member(JobStatus, {1}) && member(ClusterId, {1, 2})"]


def test_jobs_without_an_event_log_are_asked_of_the_schedd_in_one_query_per_poll(tmp_path):
    schedd = Queue(held=True)
    waiting, _ = held_and_idle(schedd, BusySlots(), tracker=SimpleNamespace(path=tmp_path / "never-written.log"))
    jobs = queued_jobs(5, submitted=time.time() - 60)  # past the grace an event log gets to appear
    for poll in range(2):
        waiting.new_poll(jobs)
        records = [waiting.without_event_log(job) for job in jobs]
        assert [record.phase for record in records] == [JobPhase.HELD] + [JobPhase.IDLE] * 4
        assert records[0].hold_code == 12 and records[0].hold_subcode == 13
    assert schedd.constraints == ["member(JobStatus, {1, 2, 5}) && member(ClusterId, {1, 2, 3, 4, 5})"] * 2


def test_jobs_no_slot_can_run_are_said_at_their_first_look_once_per_rule_and_request():
    """A negotiation cycle after they were first seen idle, jobs that no slot can run are said (not failed: that
    waits for the idle timeout), once for the five that ask alike, from one schedd query."""
    warnings, schedd = [], Queue(memory_mb=10_000_000)
    waiting, failed = held_and_idle(schedd, BusySlots(), idle_timeout_s=1800, negotiation_interval_s=0,
                                    warnings=warnings)
    jobs = queued_jobs(5)
    for poll in range(3):  # the first poll sees them idle; the second gives each its first look; the third none
        waiting.new_poll(jobs)
        assert all(waiting.idle(job) for job in jobs)
    assert failed == [] and len(warnings) == 1, warnings
    assert "HTCondor job 1.0 (rule any) has been idle for over 0 s, and no slot can run it" in warnings[0]
    assert "FAILS (job Requirements) TARGET.Memory >= RequestMemory" in warnings[0]
    assert "it is removed and fails once it has been idle for 1800 s (the idle timeout)" in warnings[0]
    assert len(schedd.constraints) == 1


def test_a_job_asking_for_what_an_earlier_job_of_the_run_started_with_gets_no_first_look():
    """A chain's next link waits for a slot like the one its predecessor ran on: no schedd query is made to
    judge whether a slot can run it, however long it waits for its negotiation cycle."""
    schedd = Queue()
    waiting, _ = held_and_idle(schedd, BusySlots(), idle_timeout_s=1800, negotiation_interval_s=0)
    earlier, later = queued_jobs(2)
    waiting.started(earlier)
    for poll in range(3):
        waiting.new_poll([later])
        assert waiting.idle(later)
    assert schedd.constraints == []


def test_jobs_still_idle_a_second_after_their_submit_get_one_more_reschedule_together():
    """A job queued just as its predecessor's shadow exits waits for the schedd's next StartJobs pass to take the
    claim that job kept, unless the schedd is asked to reschedule once more."""
    schedd = Queue()
    waiting, _ = held_and_idle(schedd, BusySlots(), idle_timeout_s=1800)
    fresh, waited = queued_jobs(2), queued_jobs(3, submitted=time.time() - 2)
    for poll in range(3):
        waiting.new_poll(fresh + waited)
        assert all(waiting.idle(job) for job in fresh + waited)
    assert schedd.reschedules == 1 and schedd.constraints == []


def test_a_job_idle_again_after_running_is_looked_at_an_idle_timeout_later_not_at_once():
    """Evicted or preempted after it ran, a job's time seen idle starts again: the idle spell before it ran does not
    count (it would have it looked at, and with no slot in the collector then failed, at once)."""
    schedd = Queue()
    waiting, _ = held_and_idle(schedd, BusySlots(), idle_timeout_s=60)
    [job] = queued_jobs(1)
    waiting.new_poll([job])
    assert waiting.idle(job)  # seen idle
    job.aux["htcannex"].since -= 120  # two minutes ago; then it ran
    job.aux["htcannex"].seen_running()
    waiting.new_poll([job])
    assert waiting.idle(job)  # idle again: seen idle from now
    assert schedd.constraints == []


class AnnexSlots(BusySlots):
    """A collector whose annex `htcannex-a` has one busy slot that could run these jobs."""

    def query(self, ad_type, constraint, projection):
        self.queries += 1
        return [classad2.ClassAd({"Name": "slot1@a", "AnnexName": "htcannex-a", "Cpus": 1, "Memory": 2048,
                                  "State": "Claimed", "LastHeardFrom": int(time.time())})]


def test_a_sweep_queued_together_on_an_annex_gets_its_slots_judged_once_at_its_first_look(monkeypatch):
    """The jobs of a sweep queued together on an annex come due for their first look in the same poll, before
    one has started (the annex's first job waits for a negotiation cycle): whether a slot of the annex can run
    them is judged once for the request they share, not once per job (each judgement analyses every slot)."""
    from snakemake_executor_plugin_htcannex.track import recovery
    judged = []
    judge = recovery.annex_cannot_run
    monkeypatch.setattr(recovery, "annex_cannot_run", lambda *args: judged.append(args) or judge(*args))
    schedd = Queue()
    waiting, failed = held_and_idle(schedd, AnnexSlots(), idle_timeout_s=1800, negotiation_interval_s=0)
    site = waiting._runtime.config.sites["a"]
    jobs = queued_jobs(20)
    for job in jobs:
        job.aux["htcannex"].site = site
    for poll in range(3):  # the first poll sees them idle; the second gives each its first look; the third none
        waiting.new_poll(jobs)
        assert all(waiting.idle(job) for job in jobs)
    assert len(judged) == 1 and failed == []
