"""What the executor does with a job that is queued and not running: held, waiting for its annex,
or idle for longer than the idle timeout (annex: idle_timeout, --htcannex-idle-timeout).

- Held (`held`): the hold policy (tracking.HoldPolicy, holds.py for what a hold means) releases
  it, or it is removed and failed; after a memory hold the job's next attempt asks for more.
- Held by htcannex until its annex is up (`waiting_for_annex`): released once the annex is up;
  moved to the next site of its rotation (recovery.py) when it did not come up in time.
- Idle (`idle`): looked at once per idle timeout; an annex job whose annex is gone, or has no slot
  that can run it, is moved; any other job no slot can run is reported (diagnose.never_matches). A job
  behind busy slots that can run it waits. The collector is asked once per status poll (`new_poll`).
  Every job also gets a first look a negotiation cycle after it was first seen idle. Where no slot that
  can run it can appear later (the embedded pool; a job bound to an annex that is up) it is decided
  then: moved, or failed with the explanation. Elsewhere one no slot can run is said then (a warning,
  once per rule and request) and failed only at the idle timeout (30 min by default), in case such a
  slot joins the pool. A job asking for what a job of this run has already started with (the same
  site and request) gets no first look: a slot can run it, and a chain's links cost no schedd query.
- Idle a second after its submit (`idle`): the schedd is asked once more to reschedule (RESCHEDULE_AFTER_S).
- With no event log (`without_event_log`): each job's state (idle, running or held) asked of the schedd
  instead, once per poll, and handled as above.

Each returns what the executor's status check needs: whether the job is still active (False once
it was reported failed through `fail`).
"""
import time
from typing import Callable, Optional

import htcondor2
from htcondor_codes import JobStatus
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo

from snakemake_executor_plugin_htcannex import secrets
from snakemake_executor_plugin_htcannex.annex.manager import AnnexState
from snakemake_executor_plugin_htcannex.ops.diagnose import never_matches
from snakemake_executor_plugin_htcannex.runtime import Runtime
from snakemake_executor_plugin_htcannex.schedd import job_constraint, job_id
from snakemake_executor_plugin_htcannex.sites.site import SiteKind
from snakemake_executor_plugin_htcannex.submit.description import JobSpec, job_signature
from snakemake_executor_plugin_htcannex.submit.job_spec import wildcards_of
from snakemake_executor_plugin_htcannex.track import failure_hints, recovery
from snakemake_executor_plugin_htcannex.track.event_log import JobPhase, JobRecord
from snakemake_executor_plugin_htcannex.track.holds import HoldKind, memory_for_retry
from snakemake_executor_plugin_htcannex.track.memory_floors import MemoryFloors
from snakemake_executor_plugin_htcannex.track.tracked_job import WaitingOn, tracked

# How long after a submit a missing event log means HTCondor cannot write it (then the schedd is asked).
NO_EVENT_LOG_GRACE_S = 10.0
# A job queued as its predecessor's shadow exits misses the claim that job kept (keep_claim_idle, description.py):
# the schedd starts a job on a kept claim in StartJobs, which the RESCHEDULE htcondor2's submit sends runs, but not
# when the shadow exits after it, and else only every SCHEDD_INTERVAL (300 s by default; schedd.cpp child_exit,
# StartJobs). A job still idle this long after its submit gets one more reschedule (one per poll for all of them).
RESCHEDULE_AFTER_S = 1.0

Fail = Callable[..., None]  # the executor's report_job_error(job_info, msg=...)


class CollectorOfThisPoll:
    """The collector as of one status poll: each query is asked once per poll. Jobs queued together come
    due for a look together (once per idle timeout), and each look asks for the slots of the pool or of
    the job's annex: on a large pool, every slot. Judged against one answer per poll, a queue of a
    thousand idle jobs costs one query, not a thousand."""

    def __init__(self, collector):
        self._collector = collector
        self._answers: dict = {}

    def new_poll(self) -> None:
        self._answers.clear()

    def query(self, ad_type, constraint, projection):
        key = (ad_type, str(constraint), tuple(projection))
        if key not in self._answers:
            self._answers[key] = self._collector.query(ad_type, constraint=constraint, projection=projection)
        return self._answers[key]


class HeldAndIdle:
    def __init__(self, runtime: Runtime, logger, unmatchable: str, fail: Fail):
        """`unmatchable`: --htcannex-unmatchable ("fail" or "wait"); `fail`: how a job is reported failed."""
        self._runtime, self._logger, self._unmatchable = runtime, logger, unmatchable
        self._fail = fail
        collector = runtime.connection.collector
        self._collector = CollectorOfThisPoll(collector) if collector is not None else None
        # job signature -> the memory (MB) its next attempt asks for at least, after a memory hold or kill;
        # on disk, so that a restarted driver asks for it too
        self._memory_floors = MemoryFloors(runtime.submit_options.workdir)
        self._warned_no_event_log = False
        self._warned_unmatchable: set[tuple] = set()  # (rule, report) said at a first look
        self._started: set[tuple] = set()  # (site, request) of the jobs seen running: a slot can run them
        # (site, request) that a slot of its annex can run, as of this poll: the jobs of a sweep queued together
        # come due for their first look together, before one has started, and each look analyses every slot.
        self._runnable_this_poll: set[tuple] = set()
        self._active: list[SubmittedJobInfo] = []  # the jobs of this status poll
        # Their ads, asked of the schedd once per poll where needed: the idle ones (looked at) and, with no
        # event log, every one's state. Jobs queued together come due together: one query, not one per job.
        self._idle_ads: Optional[dict] = None
        self._queued_ads: Optional[dict] = None
        self._rescheduled = False  # in this poll

    def new_poll(self, active_jobs: list[SubmittedJobInfo]) -> None:
        """A new status poll of `active_jobs`: the jobs looked at from now on get the collector's and the
        schedd's new answers."""
        if self._collector is not None:
            self._collector.new_poll()
        self._active, self._idle_ads, self._queued_ads, self._rescheduled = active_jobs, None, None, False
        self._runnable_this_poll.clear()

    def started(self, job_info: SubmittedJobInfo) -> None:
        """The event log says the job has started (it may have ended since)."""
        asks = _what_it_asks(tracked(job_info))
        if asks is not None:
            self._started.add(asks)

    def memory_floor(self, spec: JobSpec) -> Optional[int]:
        """The memory (MB) this job asks for at least, when an earlier attempt was held for memory."""
        return self._memory_floors.get(job_signature(spec, self._runtime.submit_options))

    def held(self, job_info: SubmittedJobInfo, record: JobRecord) -> bool:
        """Release the held job or remove and report it, as the hold policy decides."""
        runtime = self._runtime
        tracked(job_info).wait_for(WaitingOn.RELEASE, time.time())
        decision = runtime.hold_policy.decide(record, tracked(job_info).spec.rule)
        if decision is None:
            return True
        # A hold reason may quote a URL with its token (osdf://...?authz=...).
        message = secrets.redact(decision.message)
        if decision.release:
            self._logger.warning(message)
            runtime.connection.schedd.act(htcondor2.JobAction.Release, record.job_id, reason=message)
            return True
        self._remove(record.job_id, "held: " + secrets.redact(record.hold_reason or ""))
        if record.hold.kind is HoldKind.MISSING_OUTPUT:  # its command ran and most likely failed: what it said
            message += " " + failure_hints.command_output_text(tracked(job_info).stderr, tracked(job_info).spec.logs)
        if record.hold.needs_more_memory:
            message += self.more_memory_next_time(tracked(job_info).spec, "it was held with")
        self._fail(job_info, msg=message + " ")
        return False

    def idle(self, job_info: SubmittedJobInfo) -> bool:
        """Idle: released, or evicted when its annex expired. A job idle too long is looked at (once
        per idle timeout): an annex job whose annex is gone, or has no slot that can run it, waits for
        nothing and is moved; any other job that no slot can run is reported (diagnose.never_matches).
        Where no slot that can run it can appear (`_closed`), that is decided at its first look."""
        runtime, job, now = self._runtime, tracked(job_info), time.time()
        site = job.site
        if not job.rescheduled and now - job.since > RESCHEDULE_AFTER_S:
            job.rescheduled = True
            if not self._rescheduled:
                self._rescheduled = True
                runtime.connection.schedd.reschedule()
        first_look_s = runtime.connection.negotiation_interval_s
        asks = _what_it_asks(job)
        if ((asks is None or asks not in self._started)
                and job.due_a_first_look(first_look_s, runtime.idle_timeout_s, now)):
            if self._closed(job):
                ad = self._idle_ad(job_info)
                if ad is not None:
                    return self._decided_at_first_look(job_info, ad, first_look_s)
            elif not _on_annex(job):
                self._warn_if_unmatchable(job_info, first_look_s)
        if not job.due_a_look(runtime.idle_timeout_s, now):
            return True
        ad = self._idle_ad(job_info)
        if ad is None:  # it has started or left the queue meanwhile
            return True
        if _on_annex(job):
            stuck = recovery.stuck_on_annex(self._collector, ad, site.annex_name)
            return self._move_or_fail(job_info, stuck, ad) if stuck else True
        return self._unless_unmatchable(job_info, ad, runtime.idle_timeout_s)

    def _closed(self, job) -> bool:
        """Whether every slot that could ever run this job is known now: on the embedded pool (its slots and
        the annexes of the catalogue are all there are), and for a job bound to an annex (it matches only
        that annex's slots). Elsewhere a slot that can run a job may yet join the pool: it waits for the
        idle timeout."""
        return self._runtime.connection.embedded or _on_annex(job)

    def _decided_at_first_look(self, job_info: SubmittedJobInfo, ad, idle_s: float) -> bool:
        """A job idle a negotiation cycle where no other slot can appear (`_closed`): moved when no slot of
        its annex (up) can run it, failed when no slot at all can; else it waits for a free slot."""
        job = tracked(job_info)
        if _on_annex(job):
            asks = _what_it_asks(job)
            if asks is not None and asks in self._runnable_this_poll:
                return True
            stuck = recovery.annex_cannot_run(self._collector, ad, job.site.annex_name)
            if not stuck and asks is not None:
                self._runnable_this_poll.add(asks)
            return self._move_or_fail(job_info, stuck, ad, waited_s=idle_s) if stuck else True
        return self._unless_unmatchable(job_info, ad, idle_s)

    def waiting_for_annex(self, job_info: SubmittedJobInfo) -> bool:
        """A job held until its annex is up: released when it is, moved when it did not come up in time."""
        runtime = self._runtime
        job = tracked(job_info)
        site = job.site
        status = runtime.annexes.ensure(site)  # also retries a request a guard once refused
        if status.state is AnnexState.UP:
            runtime.connection.schedd.act(
                htcondor2.JobAction.Release, job_info.external_jobid, reason=f"annex {site.name} is up"
            )
            job.wait_for(WaitingOn.NOTHING, time.time())
            self._logger.info(f"Annex {site.name} is up: released HTCondor job {job_info.external_jobid}")
            return True
        if time.time() - job.since > runtime.idle_timeout_s:
            # Left queued at the site, it would start later and idle on the allocation.
            withdrawn = runtime.annexes.give_up(site)
            return self._move_or_fail(job_info, f"annex {site.annex_name} did not come up ({withdrawn}). "
                                                f"{status.message}")
        return True

    def without_event_log(self, job_info: SubmittedJobInfo) -> Optional[JobRecord]:
        """A job's record from its ad, when the event log was never created. HTCondor writes the log as the
        job's owner; where the owner cannot write the submit directory there is none, and the job's outputs
        are held 12/13 (holds.py). Each job's state is asked of the schedd instead (one query per poll), so
        the run does not wait forever on a log that will never come: a held job is handled as held, an idle
        one is looked at as idle (one no slot can run is said, then failed)."""
        tracker = self._runtime.tracker
        if tracker.path.exists() or time.time() - tracked(job_info).submitted < NO_EVENT_LOG_GRACE_S:
            return None
        if not self._warned_no_event_log:
            self._warned_no_event_log = True
            self._logger.warning(f"HTCondor has not created the event log {tracker.path}: it writes it as the "
                                 "job's owner, who cannot write there (see docs/real-access-point.md); "
                                 "asking the schedd about each job instead")
        if self._queued_ads is None:
            self._queued_ads = self._poll_ads(
                (JobStatus.IDLE, JobStatus.RUNNING, JobStatus.HELD),
                ["ClusterId", "ProcId", "JobStatus", "HoldReason", "HoldReasonCode", "HoldReasonSubCode"], self._active)
        ad = self._queued_ads.get(job_info.external_jobid)
        if ad is None:
            return None
        if ad["JobStatus"] != JobStatus.HELD:
            return JobRecord(job_info.external_jobid, phase=_PHASES[ad["JobStatus"]])
        return JobRecord(job_info.external_jobid, phase=JobPhase.HELD, hold_reason=ad.get("HoldReason"),
                         hold_code=ad.get("HoldReasonCode"), hold_subcode=ad.get("HoldReasonSubCode"))

    def _idle_ad(self, job_info: SubmittedJobInfo):
        """The ad of a job being looked at, if it is idle: the first one of a poll asks for itself and every
        job of the poll still due a look (one query; every attribute, as matching reads them all)."""
        if self._idle_ads is None or job_info.external_jobid not in self._idle_ads:
            runtime, now = self._runtime, time.time()
            due = [job for job in self._active if job is not job_info and _look_due(
                tracked(job), runtime.connection.negotiation_interval_s, runtime.idle_timeout_s, now)]
            self._idle_ads = {job_info.external_jobid: None} | {job.external_jobid: None for job in due}
            self._idle_ads |= self._poll_ads((JobStatus.IDLE,), [], [job_info, *due])
        return self._idle_ads[job_info.external_jobid]

    def _poll_ads(self, statuses: tuple[JobStatus, ...], projection: list[str], jobs: list[SubmittedJobInfo]) -> dict:
        """The ads of these jobs that are in one of `statuses`, by job id: one schedd query."""
        clusters = ", ".join(sorted({job.external_jobid.split(".")[0] for job in jobs}, key=int))
        wanted = ", ".join(f"{status:d}" for status in statuses)
        ads = self._runtime.connection.schedd.query(f"member(JobStatus, {{{wanted}}}) && member(ClusterId, {{{clusters}}})",
                                                    projection=projection)
        return {job_id(ad): ad for ad in ads}

    def _warn_if_unmatchable(self, job_info: SubmittedJobInfo, idle_s: float) -> None:
        """Say early that no slot can run this job, once per rule and request: it is failed (or kept, with
        --htcannex-unmatchable wait) only at the idle timeout, in case such a slot appears."""
        ad = self._idle_ad(job_info)
        report = never_matches(ad, self._runtime.config, self._collector) if ad is not None else None
        rule = tracked(job_info).spec.rule
        if report is None or (rule, tuple(report)) in self._warned_unmatchable:
            return
        self._warned_unmatchable.add((rule, tuple(report)))
        outcome = ("stays queued (htcannex-unmatchable: wait)" if self._unmatchable == "wait"
                   else "is removed and fails")
        self._logger.warning(
            self._unmatchable_report(job_info, idle_s, report)
            + f"Unless a slot that can run it appears, it {outcome} once it has been idle for "
              f"{self._runtime.idle_timeout_s:g} s (the idle timeout); jobs of rule {rule} that ask for the "
              "same are not reported again before then. Change what the rule asks for (the FAILS lines), "
              "or press Ctrl-C.")

    def _unmatchable_report(self, job_info: SubmittedJobInfo, idle_s: float, report: list[str]) -> str:
        job_id = job_info.external_jobid
        return (f"HTCondor job {job_id} (rule {tracked(job_info).spec.rule}) has been idle for over {idle_s:g} s, and "
                f"no slot can run it, neither one in the collector nor a site of {self._runtime.config.path}; as "
                f"`htcannex why {job_id}` explains:\n" + secrets.redact("\n".join(report)) + "\n")

    def _unless_unmatchable(self, job_info: SubmittedJobInfo, job_ad, idle_s: float) -> bool:
        """Report a job no slot can run, live or in the catalogue, with `htcannex why`'s explanation;
        fail it, or leave it queued with --htcannex-unmatchable wait. `idle_s`: how long it has been idle."""
        runtime = self._runtime
        report = never_matches(job_ad, runtime.config, self._collector)
        if report is None:
            return True
        job_id = job_info.external_jobid
        what = self._unmatchable_report(job_info, idle_s, report)
        if self._unmatchable == "wait":
            self._logger.warning(what + "It stays queued (htcannex-unmatchable: wait) until a slot that can run it "
                                        "appears; change what it asks for, or add such slots.")
            return True
        self._remove(job_id, "no slot can run it")
        self._fail(job_info, msg=what + "The job was removed: change what the rule asks for (the "
                                        "FAILS lines), or set htcannex-unmatchable: wait to keep such "
                                        "jobs queued until slots that can run them appear. ")
        return False

    def more_memory_next_time(self, spec: JobSpec, why: str) -> str:
        """Remember that this job's next attempt asks for more memory than this one did, and say so: after
        a memory hold, whatever its code (34, 26, 21: holds.py), or an out-of-memory kill
        (failure_hints.killed). A retry with the same request ends the same way. `why` completes
        "(... N MB)"."""
        asked = spec.resources.get("mem_mb")
        if not isinstance(asked, int):
            return ""
        floor = memory_for_retry(asked)
        self._memory_floors.raise_to(job_signature(spec, self._runtime.submit_options), floor)
        return f" A retry asks for at least {floor} MB ({why} {asked} MB)."

    def _move_or_fail(self, job_info: SubmittedJobInfo, why: str, job_ad=None, waited_s: Optional[float] = None) -> bool:
        """Send a job whose annex is not there to the next site of its rotation that can run it
        (the same job: it keeps its self-checkpoint); fail it when no site is left. `waited_s`: how long
        it waited (the idle timeout unless said)."""
        runtime, job, snakemake_job = self._runtime, tracked(job_info), job_info.job
        waited_s = runtime.idle_timeout_s if waited_s is None else waited_s
        if job_ad is None:
            ads = runtime.connection.schedd.query(job_constraint(job_info.external_jobid), projection=[])
            job_ad = ads[0] if ads else None
        tried = job.tried
        tried.add(job.site.name)
        site = job_ad is not None and recovery.next_site(
            runtime.config.rotation, runtime.config.sites, snakemake_job.name, wildcards_of(snakemake_job),
            snakemake_job.attempt, tried, job_ad, job.placement_request())
        if not site:
            return self._fail_waiting(job_info, why, waited_s)
        # Retargeted first: `htcondor annex create` refuses an annex no queued job is for (HPC_ANNEX_REQUIRE_JOB).
        recovery.retarget(runtime.connection.schedd, job_info.external_jobid, site)
        status = runtime.annexes.ensure(site)
        tried.add(site.name)
        self._logger.warning(f"HTCondor job {job_info.external_jobid} waited over {waited_s:g} s: "
                             f"{why} Moved it to site {site.name} (annex {site.annex_name}); it keeps its "
                             f"self-checkpoint. {status.message}")
        job.moved_to(site, time.time())
        return True

    def _fail_waiting(self, job_info: SubmittedJobInfo, why: str, waited_s: float) -> bool:
        self._remove(job_info.external_jobid, f"waited over {waited_s:g} s for its annex")
        self._fail(job_info, msg=(
            f"HTCondor job {job_info.external_jobid} waited over {waited_s:g} s and did not run: "
            f"{why} The job was removed. With --retries, Snakemake resubmits it as the next "
            f"attempt, which rotation sends to the next site. "
        ))
        return False

    def _remove(self, job_id: str, reason: str) -> None:
        self._runtime.connection.schedd.act(htcondor2.JobAction.Remove, job_id, reason=reason)


# A queued job's JobStatus as the phase the executor acts on (without an event log).
_PHASES = {JobStatus.IDLE: JobPhase.IDLE, JobStatus.RUNNING: JobPhase.RUNNING}


def _what_it_asks(job) -> Optional[tuple]:
    """What a slot is judged by for this job: its site and its request as the site admitted it (None for
    a job adopted from an earlier run, whose request was not judged in this one)."""
    if job.admitted is None:
        return None
    return job.site.name if job.site is not None else None, job.admitted


def _on_annex(job) -> bool:
    return job.site is not None and job.site.kind is SiteKind.ANNEX


def _look_due(job, first_look_s: float, idle_timeout_s: float, now: float) -> bool:
    """Whether idle() will look at this job now (its first look, or one at the idle timeout)."""
    return job.first_look_due(first_look_s, idle_timeout_s, now) or job.look_due(idle_timeout_s, now)
