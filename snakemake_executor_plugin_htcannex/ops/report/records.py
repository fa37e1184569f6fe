"""One user event log read into a record per job: its runs, holds, transfers and usage.

The log alone is enough (DAGMan and MLDAG logs work too: the submit event's
"DAG Node:" note names the node). htcondor2.JobEventLog parses the text; this
module only follows each job from event to event.

A *run* is one stay on an execute slot: it begins with the input transfer (or the
execute event when nothing is transferred) and ends with the job's termination,
an eviction, a hold, a shadow exception or its removal. A self-checkpointing job
that exits with its checkpoint code is restarted in the same run: HTCondor (and the
embedded pool) writes the checkpoint's output transfer and no new execute event. An
output transfer the job went on after (another one followed, or the run ended
without the job's exit) counts as a checkpoint of the run.
"""
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import htcondor2
from htcondor_codes import SUBMITTED_ON_HOLD_REASON, HoldCode
from htcondor2 import FileTransferEventType as Transfer
from htcondor2 import JobEventType as Event

from snakemake_executor_plugin_htcannex.track.event_log import NEVER_WAIT

# Where each run ended.
TERMINATED, EVICTED, HELD, ABORTED, SHADOW_EXCEPTION, RUNNING = (
    "terminated", "evicted", "held", "aborted", "shadow exception", "running")
# "Usr 0 00:01:02, Sys 0 00:00:03": HTCondor's rusage text (formatRusage in condor_event.cpp).
_RUSAGE = re.compile(r"Usr (\d+) (\d+):(\d+):(\d+), Sys (\d+) (\d+):(\d+):(\d+)")


class EventLogError(ValueError):
    """The file named is not a readable, non-empty HTCondor user event log; the message says why."""


@dataclass
class Interval:
    start: float
    end: Optional[float] = None

    def seconds(self, now: float) -> float:
        return (self.end if self.end is not None else now) - self.start


@dataclass
class Hold:
    at: float
    code: Optional[int]
    subcode: Optional[int]
    reason: str
    released_at: Optional[float] = None  # None: still held, or removed while held


@dataclass
class Run:
    """One stay on an execute slot."""

    began_at: float  # input transfer start, or execution start without transfer
    executing_at: Optional[float] = None
    slot: Optional[str] = None
    host: Optional[str] = None
    allocated: dict = field(default_factory=dict)  # the slot's Cpus, Memory, Disk, GPUs (ExecuteProps)
    annex: Optional[str] = None  # the slot's AnnexName, where the job named it in ulog_execute_attrs (htcannex does)
    input_transfers: list = field(default_factory=list)  # [Interval]
    output_transfers: list = field(default_factory=list)
    checkpoints: list = field(default_factory=list)  # times a self-checkpoint was taken
    ended_at: Optional[float] = None
    ending: str = RUNNING


@dataclass
class Usage:
    """One row of the terminated event's "Partitionable Resources" table."""

    used: Optional[float]
    requested: Optional[float]
    allocated: Optional[float]


@dataclass
class JobHistory:
    job_id: str  # "cluster.proc"
    submitted_at: Optional[float]
    dag_node: Optional[str] = None
    runs: list = field(default_factory=list)
    holds: list = field(default_factory=list)
    peak_memory_mb: Optional[int] = None  # largest MemoryUsage of the image-size events
    finished_at: Optional[float] = None
    return_value: Optional[int] = None
    signal: Optional[int] = None
    removed: Optional[str] = None  # the abort reason
    resources: dict = field(default_factory=dict)  # "Cpus", "Memory", "Disk", "Gpus", ... -> Usage
    execute_seconds: Optional[float] = None  # TimeExecuteUsage of the table, where written
    cpu_seconds: Optional[float] = None  # Total Remote Usage, user + system
    bytes_received: Optional[float] = None  # Total Bytes Received By Job (its input)
    bytes_sent: Optional[float] = None  # Total Bytes Sent By Job (its output)
    idle: list = field(default_factory=list)  # [Interval]: idle in the queue, waiting for a match

    @property
    def open_run(self) -> Optional[Run]:
        return self.runs[-1] if self.runs and self.runs[-1].ending == RUNNING else None


def check_readable(path: Path) -> None:
    """Raise EventLogError unless `path` is a non-empty regular file this process can read."""
    if not path.exists():
        raise EventLogError(f"{path} does not exist: give the user event log the jobs wrote "
                            "(submit `log =`; htcannex writes .htcannex/jobs.log in the run directory)")
    if not path.is_file():
        raise EventLogError(f"{path} is not a file: give the user event log itself, not a directory")
    try:
        with open(path, "rb") as log:
            first = log.read(1)
    except OSError as error:
        raise EventLogError(f"{path} cannot be read: {error.strerror}") from error
    if not first:
        raise EventLogError(f"{path} is empty: no job has written an event to it yet")


def count_events(path: Path) -> int:
    """How many events the log holds (its "..." separator lines): the progress bar's total."""
    with open(path, "rb") as log:
        return sum(line.rstrip(b"\r\n") == b"..." for line in log)


def read_histories(path: Path, step: Callable[[int], None] = lambda done: None) -> list:
    """Every job of the log, in submit order; `step(n)` is called after the n-th event."""
    path = Path(path)
    check_readable(path)
    reader = _Reader()
    log = htcondor2.JobEventLog(str(path))
    try:
        for number, event in enumerate(log.events(stop_after=NEVER_WAIT), 1):
            reader.apply(event)
            step(number)
    finally:
        log.close()
    if not reader.histories:
        raise EventLogError(f"{path} holds no HTCondor job events: is it a user event log "
                            "(lines like '000 (001.000.000) ... Job submitted from host')?")
    return reader.histories


class _Reader:
    def __init__(self):
        self.histories: list = []
        self._current: dict = {}  # job id -> its latest JobHistory (ids recur when a pool restarts)

    def apply(self, event) -> None:
        event = _TimedEvent(event)
        job_id = f"{event.cluster}.{event.proc}"
        history = self._current.get(job_id)
        if event.type == Event.SUBMIT or history is None:
            history = self._current[job_id] = JobHistory(job_id, submitted_at=event.timestamp)
            _become_idle(history, event)
            self.histories.append(history)
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(history, event)


class _TimedEvent:
    """An event whose time is parsed once: htcondor2 parses EventTime (strptime) on every
    `timestamp`, which was half the reading time of a long log."""

    def __init__(self, event):
        self._event = event
        self.timestamp = event.timestamp

    def __getattr__(self, name):
        return getattr(self._event, name)

    def __contains__(self, key) -> bool:
        return key in self._event

    def __getitem__(self, key):
        return self._event[key]


def _on_submit(history: JobHistory, event) -> None:
    # The parser puts DAGMan's "DAG Node: NAME" note (old form) and its structured
    # notes (HTCondor 24+) into the same StructuredNotes ad.
    notes = event.get("StructuredNotes")
    if notes is not None:
        history.dag_node = notes.get("DAGNodeName")


def _begin_run(history: JobHistory, event) -> Run:
    run = history.open_run
    if run is None:
        run = Run(began_at=event.timestamp)
        history.runs.append(run)
        _stop_idling(history, event)
    return run


def _on_transfer(history: JobHistory, event) -> None:
    kind = event.get("Type")
    if kind in (Transfer.IN_QUEUED, Transfer.IN_STARTED):
        run = _begin_run(history, event)
        if kind == Transfer.IN_STARTED:
            run.input_transfers.append(Interval(event.timestamp))
    elif kind == Transfer.IN_FINISHED:
        _close(_begin_run(history, event).input_transfers, event.timestamp)
    elif kind in (Transfer.OUT_STARTED, Transfer.OUT_FINISHED):
        run = history.open_run
        if run is None:
            return
        if kind == Transfer.OUT_STARTED:
            _checkpoint_if_transferred_before(run)
            run.output_transfers.append(Interval(event.timestamp))
        else:
            _close(run.output_transfers, event.timestamp)


def _checkpoint_if_transferred_before(run: Run) -> None:
    """A second output transfer in one run: the first one carried a self-checkpoint."""
    if run.output_transfers and run.output_transfers[-1].end is not None:
        run.checkpoints.append(run.output_transfers[-1].end)


def _close(intervals: list, at: float) -> None:
    if intervals and intervals[-1].end is None:
        intervals[-1].end = at


def _on_execute(history: JobHistory, event) -> None:
    run = _begin_run(history, event)
    if run.executing_at is None:
        run.executing_at = event.timestamp
    run.slot = event.get("SlotName")
    run.host = event.get("ExecuteHost")
    props = event.get("ExecuteProps")
    if props is not None:
        run.allocated = {name: props[name] for name in ("Cpus", "Memory", "Disk", "GPUs")
                         if isinstance(props.get(name), (int, float))}
        run.annex = props.get("AnnexName")


def _end_run(history: JobHistory, event, ending: str, job_exited: bool = False) -> None:
    """`job_exited`: the run ends with the job's exit, after which its outputs were transferred;
    otherwise a finished output transfer in the run carried a self-checkpoint."""
    run = history.open_run
    if run is not None:
        if not job_exited:
            _checkpoint_if_transferred_before(run)
        run.ended_at = event.timestamp
        run.ending = ending


def _become_idle(history: JobHistory, event) -> None:
    if not history.idle or history.idle[-1].end is not None:
        history.idle.append(Interval(event.timestamp))


def _stop_idling(history: JobHistory, event) -> None:
    _close(history.idle, event.timestamp)


def _on_image_size(history: JobHistory, event) -> None:
    memory = event.get("MemoryUsage")
    if isinstance(memory, int):
        history.peak_memory_mb = max(memory, history.peak_memory_mb or 0)


def _after_the_job_exited(event) -> bool:
    """An eviction or hold that follows the job's exit and its output transfer: "terminated and was
    requeued" (max_retries, on_exit_remove), or its outputs did not come back (code 12; a real
    25.14.0 pool writes an evicted event with ReasonCode 12, then the held event). An on_exit_hold's
    code 3 cannot be told from a periodic_hold's: its output transfer counts as a checkpoint."""
    return (bool(event.get("TerminatedAndRequeued"))
            or HoldCode.TransferOutputError in (event.get("ReasonCode"), event.get("HoldReasonCode")))


def _on_evicted(history: JobHistory, event) -> None:
    _end_run(history, event, EVICTED, job_exited=_after_the_job_exited(event))
    _become_idle(history, event)


def _on_shadow_exception(history: JobHistory, event) -> None:
    _end_run(history, event, SHADOW_EXCEPTION)
    _become_idle(history, event)


def _on_held(history: JobHistory, event) -> None:
    _end_run(history, event, HELD, job_exited=_after_the_job_exited(event))
    history.holds.append(Hold(event.timestamp, event.get("HoldReasonCode"), event.get("HoldReasonSubCode"),
                              event.get("HoldReason") or ""))
    _stop_idling(history, event)


def _on_released(history: JobHistory, event) -> None:
    if history.holds and history.holds[-1].released_at is None:
        history.holds[-1].released_at = event.timestamp
    elif not history.runs and history.idle and history.idle[-1].end is None:
        # A release with no held event before it: the job was submitted on hold, for which
        # HTCondor writes no held event. Its wait since the submit was a hold, not queue time.
        waited = history.idle.pop()
        history.holds.append(Hold(waited.start, HoldCode.SubmittedOnHold, 0, SUBMITTED_ON_HOLD_REASON,
                                  released_at=event.timestamp))
    _become_idle(history, event)


def _on_aborted(history: JobHistory, event) -> None:
    _end_run(history, event, ABORTED)
    history.removed = event.get("Reason") or "removed from the queue"
    history.finished_at = event.timestamp
    _stop_idling(history, event)


def _on_terminated(history: JobHistory, event) -> None:
    _end_run(history, event, TERMINATED, job_exited=True)
    history.finished_at = event.timestamp
    _stop_idling(history, event)
    if event.get("TerminatedNormally"):
        history.return_value = event.get("ReturnValue")
    else:
        history.signal = event.get("TerminatedBySignal")
    history.resources = usage_table(event)
    history.execute_seconds = event.get("TimeExecuteUsage")
    history.cpu_seconds = rusage_seconds(event.get("TotalRemoteUsage"))
    history.bytes_received = event.get("TotalReceivedBytes")
    history.bytes_sent = event.get("TotalSentBytes")


def usage_table(event) -> dict:
    """The "Partitionable Resources : Usage Request Allocated" table as the parser exposes it:
    `<Res>`, `Request<Res>` and `<Res>Usage` keys, a resource being a name with both of the first
    two (TerminatedEvent::initUsageFromAd in condor_event.cpp reads it back the same way)."""
    table = {}
    for key in event.keys():
        name = key[len("Request"):]
        if key.startswith("Request") and name and name in event:
            table[name] = Usage(used=_number(event.get(f"{name}Usage")), requested=_number(event[key]),
                                allocated=_number(event[name]))
    return table


def rusage_seconds(text: Optional[str]) -> Optional[float]:
    """User + system seconds of HTCondor's "Usr D HH:MM:SS, Sys D HH:MM:SS"."""
    match = _RUSAGE.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        return None
    values = [int(part) for part in match.groups()]
    return sum(days * 86400 + hours * 3600 + minutes * 60 + seconds
               for days, hours, minutes, seconds in (values[:4], values[4:]))


def _number(value) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


_HANDLERS = {
    Event.SUBMIT: _on_submit,
    Event.FILE_TRANSFER: _on_transfer,
    Event.EXECUTE: _on_execute,
    Event.IMAGE_SIZE: _on_image_size,
    Event.JOB_EVICTED: _on_evicted,
    Event.SHADOW_EXCEPTION: _on_shadow_exception,
    Event.JOB_HELD: _on_held,
    Event.JOB_RELEASED: _on_released,
    Event.JOB_ABORTED: _on_aborted,
    Event.JOB_TERMINATED: _on_terminated,
}
