"""Job status from the one user event log, read incrementally (as DAGMan does).

Every job the plugin submits names the same `log`, so one `htcondor2.JobEventLog`
kept open across polls tells the state of all of them without a schedd query per
job per poll. `EventLogTracker.poll()` consumes the events appended since the last
poll; `HoldPolicy` decides what a held job means for Snakemake.
"""
import enum
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import htcondor2
from htcondor2 import JobEventType

from snakemake_executor_plugin_htcannex.track.holds import Hold, HoldKind

# What `JobEventLog.events(stop_after=...)` gets for a poll that never waits. 0 is documented as that,
# but htcondor2 25.x makes it a deadline of int(time.time()) and waits for the next event whenever the
# C library's time(), a coarser clock, still reads the second before: for a few ms after each second
# begins (~0.5% of polls) a poll blocked up to 1 s (a 1-s chain link, ~1 in 50; docs/benchmarks.md).
# A deadline a second in the past always polls.
NEVER_WAIT = -1


class JobPhase(enum.Enum):
    IDLE = "idle"
    RUNNING = "running"
    HELD = "held"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REMOVED = "removed"

    @property
    def finished(self) -> bool:
        return self in (JobPhase.SUCCEEDED, JobPhase.FAILED, JobPhase.REMOVED)

    @property
    def wants_attention(self) -> bool:
        """Finished or held: the executor reports it, or releases or removes it, at once. An idle
        or running job waits for the next status check (idle ones are looked at after a timeout)."""
        return self.finished or self is JobPhase.HELD


# How the operator's tools (the status board, its driver line) name each phase.
PHASE_WORDS = {JobPhase.IDLE: "idle", JobPhase.RUNNING: "running", JobPhase.HELD: "held",
               JobPhase.SUCCEEDED: "done", JobPhase.FAILED: "failed", JobPhase.REMOVED: "removed"}


@dataclass
class JobRecord:
    """What the event log has said so far about one job ("cluster.proc")."""

    job_id: str
    phase: JobPhase = JobPhase.IDLE
    submitted_at: float = field(default_factory=time.time)
    annex: Optional[str] = None
    slot: Optional[str] = None
    ever_started: bool = False
    starts: int = 0  # execute events: a restart (eviction, requeue) starts it again
    started_at: Optional[float] = None  # the latest execute event (the status board's times)
    finished_at: Optional[float] = None
    hold_reason: Optional[str] = None
    hold_code: Optional[int] = None
    hold_subcode: Optional[int] = None
    return_value: Optional[int] = None
    signal: Optional[int] = None  # the signal that ended it (abnormal termination)
    end_reason: Optional[str] = None  # abnormal termination or removal, in words
    memory_usage_mb: Optional[int] = None  # the terminated event's: what the starter last measured
    memory_requested_mb: Optional[int] = None

    @property
    def hold(self) -> Hold:
        return Hold(self.hold_code, self.hold_subcode, self.hold_reason or "")


def job_id_of(event) -> str:
    return f"{event.cluster}.{event.proc}"


class EventLogTracker:
    """Incremental reader of the shared user event log.

    The log may not exist before the first submit; the reader is opened on the
    first poll that finds it and then kept open, so each poll reads only what
    was appended.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.jobs: dict[str, JobRecord] = {}
        self._log: Optional[htcondor2.JobEventLog] = None
        self._size_read = 0

    def poll(self) -> set[str]:
        """Apply new events; return the ids of jobs whose record changed."""
        if self._log is None:
            if not self.path.exists():
                return set()
            self._log = htcondor2.JobEventLog(str(self.path))
        # Taken before reading: what is appended while we read shows up as news.
        self._size_read = self._size()
        changed = set()
        for event in self._log.events(stop_after=NEVER_WAIT):
            record = self._apply(event)
            if record is not None:
                changed.add(record.job_id)
        return changed

    def has_news(self) -> bool:
        """Whether the log grew since the last poll: one stat(), cheap enough to ask often."""
        return self._size() > self._size_read

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _apply(self, event) -> Optional[JobRecord]:
        job_id = job_id_of(event)
        record = self.jobs.get(job_id)
        if event.type == JobEventType.SUBMIT:
            # A submit event starts a fresh record even for a reused id (a new
            # pool spool restarts cluster ids at 1).
            record = self.jobs[job_id] = JobRecord(job_id, submitted_at=event.timestamp)
            return record
        if record is None:
            # Events of jobs submitted before this reader existed (an earlier
            # run appended to the same log) are kept too: adoption needs them.
            record = self.jobs[job_id] = JobRecord(job_id)
        handler = _HANDLERS.get(event.type)
        if handler is None:
            return None
        handler(record, event)
        return record


def _on_execute(record: JobRecord, event) -> None:
    record.phase = JobPhase.RUNNING
    record.ever_started = True
    record.starts += 1
    record.started_at = event.timestamp
    record.slot = event.get("SlotName")
    # The slot's machine attributes the job named in ulog_execute_attrs (description.py: AnnexName);
    # None on a slot that is not an annex's.
    props = event.get("ExecuteProps")
    record.annex = props.get("AnnexName") if props is not None else None


def _on_evicted(record: JobRecord, event) -> None:
    # Back to idle: the job will rematch, on the same annex only if it is still up.
    record.phase = JobPhase.IDLE
    record.annex = None
    record.slot = None


def _on_held(record: JobRecord, event) -> None:
    record.phase = JobPhase.HELD
    record.hold_reason = event.get("HoldReason")
    record.hold_code = event.get("HoldReasonCode")
    record.hold_subcode = event.get("HoldReasonSubCode")


def _on_released(record: JobRecord, event) -> None:
    record.phase = JobPhase.IDLE
    record.hold_reason = record.hold_code = record.hold_subcode = None


def _on_terminated(record: JobRecord, event) -> None:
    record.finished_at = event.timestamp
    record.memory_usage_mb, record.memory_requested_mb = event.get("MemoryUsage"), event.get("RequestMemory")
    if event.get("TerminatedNormally"):
        record.return_value = event.get("ReturnValue")
        record.phase = JobPhase.SUCCEEDED if record.return_value == 0 else JobPhase.FAILED
    else:
        record.phase = JobPhase.FAILED
        record.signal = event.get("TerminatedBySignal")
        record.end_reason = f"killed by signal {record.signal}"


def _on_aborted(record: JobRecord, event) -> None:
    record.phase = JobPhase.REMOVED
    record.end_reason = event.get("Reason") or "removed from the queue"


_HANDLERS = {
    JobEventType.EXECUTE: _on_execute,
    JobEventType.JOB_EVICTED: _on_evicted,
    JobEventType.JOB_HELD: _on_held,
    JobEventType.JOB_RELEASED: _on_released,
    JobEventType.JOB_TERMINATED: _on_terminated,
    JobEventType.JOB_ABORTED: _on_aborted,
}


@dataclass
class HoldDecision:
    release: bool
    message: str


class HoldPolicy:
    """What to do with a held job.

    `release-transient`: release file-transfer holds (codes 12/13) up to
    `max_releases` times per job, except those a release cannot cure (a missing
    output, an OSDF object that already exists); fail every other hold. `fail`: fail every hold.
    A failed job is removed from the queue and reported to Snakemake with the hold
    reason, so `--retries` resubmits it as the next attempt (rotation moves it to
    the next site; resources that depend on `attempt` grow).
    Our own submit-on-hold (code 15, waiting for an annex) is never a failure.
    """

    MODES = ("release-transient", "fail")

    def __init__(self, mode: str = "release-transient", max_releases: int = 2):
        if mode not in self.MODES:
            raise ValueError(
                f"hold_policy {mode!r} is not one of {', '.join(self.MODES)} "
                f"(set --htcannex-hold-policy or htcannex-hold-policy in the profile)"
            )
        self.mode = mode
        self.max_releases = max_releases
        self._releases: dict[str, int] = {}

    def decide(self, record: JobRecord, rule: str) -> Optional[HoldDecision]:
        """None for our own hold (leave it to the annex lifecycle)."""
        hold = record.hold
        if hold.ours:
            return None
        released = self._releases.get(record.job_id, 0)
        if self.mode == "release-transient" and hold.releasable and released < self.max_releases:
            self._releases[record.job_id] = released + 1
            return HoldDecision(
                True,
                f"releasing HTCondor job {record.job_id} (rule {rule}) after a transient "
                f"hold, release {released + 1} of {self.max_releases}: {record.hold_reason}",
            )
        return HoldDecision(False, describe_hold(record, rule, released))


def describe_hold(record: JobRecord, rule: str, releases: int = 0) -> str:
    """The error shown to the user for a hold that fails the job: reason and fix."""
    hold = record.hold
    what = f"HTCondor job {record.job_id} (rule {rule}) was held: {hold.headline()}."
    again = (f" It failed again after {releases} release(s)."
             if releases and hold.kind is HoldKind.TRANSFER else "")
    fix = " ".join(hold.explanation(rule, record.job_id, record.annex))
    return f"{what}{again} {fix} The job was removed from the queue."
