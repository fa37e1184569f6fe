"""A job's figures: where it ran, what it waited for, moved, used and lost.

From its event-log record (records.JobHistory) and, where the pool still has it,
its job ad (what the executor recorded: rule, wildcards, site, attempt; and the
requests). Every time is in seconds, every duration from the log's own event
times (1 s resolution), so a figure is exact to about a second.

- queue wait: idle in the queue waiting for a match (after submit, a release or an eviction);
- annex wait: held with code 15 (submitted on hold): htcannex submits a job so while its annex comes up;
- held: every other hold, until released (or until now while held);
- transfer in/out: between the file-transfer events' Started and Finished;
- compute: time on a slot less its transfers; badput: compute lost to evictions, holds and
  shadow exceptions, counted from the run's last self-checkpoint (none: the whole run).
"""
import json
import math
from dataclasses import dataclass, fields
from typing import Optional

from snakemake_executor_plugin_htcannex.track.failure_hints import killed_by_sigkill
from snakemake_executor_plugin_htcannex.track.holds import Hold, HoldKind
from snakemake_executor_plugin_htcannex.ops.report import records

@dataclass
class JobFigures:
    job: str
    chunk_key: str  # what groups attempts: rule/run/chunk, else the DAG node, else the job id
    rule: Optional[str]
    run: Optional[str]
    chunk: Optional[str]
    attempt: Optional[int]
    dag_node: Optional[str]
    site: Optional[str]
    slot: Optional[str]
    state: str
    submitted_at: Optional[float]
    finished_at: Optional[float]
    runs: int
    queue_wait_s: float
    annex_wait_s: float
    held_s: float
    holds: int
    hold_codes: str  # "34/102 12/2", in order
    memory_holds: int  # held for using more memory than requested
    killed: bool  # ended by SIGKILL, not held: an out-of-memory kill where no per-job cgroup holds (failure_hints)
    disk_holds: int
    evictions: int
    checkpoints: int
    transfer_in_s: float
    transfer_out_s: float
    compute_s: float
    longest_run_s: Optional[float]  # the longest run's compute: how many memory snapshots it had (advice.py)
    badput_s: float
    wall_s: Optional[float]  # first run's start to the end
    cpu_s: Optional[float]
    cpu_efficiency: Optional[float]  # cpu_s / (compute_s x requested cpus)
    cpus_requested: Optional[float]
    cpus_allocated: Optional[float]
    cpus_used: Optional[float]  # average cores used: the table's CpusUsage, else cpu_s / compute_s
    memory_requested_mb: Optional[float]
    memory_allocated_mb: Optional[float]
    memory_peak_mb: Optional[float]
    disk_requested_kb: Optional[float]
    disk_allocated_kb: Optional[float]
    disk_used_kb: Optional[float]
    gpus_requested: Optional[float]
    gpus_allocated: Optional[float]
    gpus_used: Optional[float]
    core_hours: float  # allocated (else requested) cores x time on slots, badput included
    gpu_hours: float
    bytes_in: Optional[float]
    bytes_out: Optional[float]
    reason: Optional[str]  # the last hold reason, or the removal reason

    @classmethod
    def columns(cls) -> list:
        return [field.name for field in fields(cls)]


def _kind(hold: records.Hold) -> HoldKind:
    return Hold(hold.code, hold.subcode, hold.reason).kind


def job_figures(history: records.JobHistory, ad: Optional[dict], now: float) -> JobFigures:
    ad = ad or {}
    wildcards = json.loads(ad.get("HtcannexWildcards") or "{}")
    rule = ad.get("HtcannexRule")
    run, chunk = wildcards.get("run"), wildcards.get("chunk")
    last = history.runs[-1] if history.runs else None
    table = history.resources

    def resource(name: str, ad_request: str, allocated_key: str):
        usage = table.get(name)
        requested = usage.requested if usage and usage.requested is not None else _number(ad.get(ad_request))
        allocated = usage.allocated if usage and usage.allocated is not None else (
            _number(last.allocated.get(allocated_key)) if last else None)
        return requested, allocated, usage.used if usage else None

    cpus = resource("Cpus", "RequestCpus", "Cpus")
    memory = resource("Memory", "RequestMemory", "Memory")
    disk = resource("Disk", "RequestDisk", "Disk")
    gpus = resource("Gpus", "RequestGPUs", "GPUs")
    memory_peak = memory[2] if memory[2] is not None else _number(history.peak_memory_mb)

    compute = sum(_compute(run_, now) for run_ in history.runs)
    slot_seconds = sum(_on_slot(run_, now) for run_ in history.runs)
    annex_holds = [hold for hold in history.holds if _kind(hold) is HoldKind.WAITING_FOR_ANNEX]
    other_holds = [hold for hold in history.holds if _kind(hold) is not HoldKind.WAITING_FOR_ANNEX]
    cores = cpus[1] if cpus[1] is not None else cpus[0]
    gpu_count = gpus[1] if gpus[1] is not None else gpus[0]
    cpu_s = history.cpu_seconds if history.cpu_seconds else None  # a zero table: not measured
    return JobFigures(
        job=history.job_id,
        chunk_key="/".join(str(part) for part in (rule, run, chunk) if part is not None) if rule
        else history.dag_node or history.job_id,
        rule=rule, run=run, chunk=None if chunk is None else str(chunk), attempt=ad.get("HtcannexAttempt"),
        dag_node=history.dag_node,
        site=ad.get("HtcannexSite") or (last.annex if last else None) or ad.get("TargetAnnexName")
        or _machine(last.slot if last else None),
        slot=last.slot if last else None,
        state=_state(history),
        submitted_at=history.submitted_at, finished_at=history.finished_at,
        runs=len(history.runs),
        queue_wait_s=sum(interval.seconds(now) for interval in history.idle),
        annex_wait_s=sum(_held(hold, history, now) for hold in annex_holds),
        held_s=sum(_held(hold, history, now) for hold in other_holds),
        holds=len(other_holds),
        hold_codes=" ".join(f"{hold.code}/{hold.subcode}" for hold in other_holds),
        memory_holds=sum(_kind(hold) is HoldKind.MEMORY for hold in other_holds),
        killed=killed_by_sigkill(history.return_value, history.signal),
        disk_holds=sum(_kind(hold) is HoldKind.DISK for hold in other_holds),
        evictions=sum(run_.ending == records.EVICTED for run_ in history.runs),
        checkpoints=sum(len(run_.checkpoints) for run_ in history.runs),
        transfer_in_s=sum(_transfers(run_.input_transfers, now) for run_ in history.runs),
        transfer_out_s=sum(_transfers(run_.output_transfers, now) for run_ in history.runs),
        compute_s=compute,
        longest_run_s=max((_compute(run_, now) for run_ in history.runs), default=None),
        badput_s=sum(_badput(run_) for run_ in history.runs),
        wall_s=(history.finished_at if history.finished_at is not None else now) - history.runs[0].began_at
        if history.runs else None,
        cpu_s=cpu_s,
        cpu_efficiency=cpu_s / (compute * cpus[0]) if cpu_s and compute and cpus[0] else None,
        cpus_requested=cpus[0], cpus_allocated=cpus[1],
        cpus_used=cpus[2] if cpus[2] is not None else (cpu_s / compute if cpu_s and compute else None),
        memory_requested_mb=memory[0], memory_allocated_mb=memory[1], memory_peak_mb=memory_peak,
        disk_requested_kb=disk[0], disk_allocated_kb=disk[1], disk_used_kb=disk[2],
        gpus_requested=gpus[0], gpus_allocated=gpus[1], gpus_used=gpus[2],
        core_hours=(cores or 0) * slot_seconds / 3600,
        gpu_hours=(gpu_count or 0) * slot_seconds / 3600,
        bytes_in=history.bytes_received, bytes_out=history.bytes_sent,
        reason=history.removed or (history.holds[-1].reason if other_holds else None),
    )


def _state(history: records.JobHistory) -> str:
    if history.removed is not None:
        return "removed"
    if history.finished_at is not None:
        return "done" if history.return_value == 0 else "failed"
    if history.holds and history.holds[-1].released_at is None:
        return "held"
    return "running" if history.runs and history.open_run is not None else "idle"


def _held(hold: records.Hold, history: records.JobHistory, now: float) -> float:
    end = hold.released_at
    if end is None:
        end = history.finished_at if history.finished_at is not None else now
    return end - hold.at


def _transfers(intervals: list, now: float) -> float:
    return sum(interval.seconds(now) for interval in intervals)


def _on_slot(run: records.Run, now: float) -> float:
    return (run.ended_at if run.ended_at is not None else now) - run.began_at


def _compute(run: records.Run, now: float) -> float:
    return max(0.0, _on_slot(run, now) - _transfers(run.input_transfers, now) - _transfers(run.output_transfers, now))


def _badput(run: records.Run) -> float:
    if run.ending in (records.TERMINATED, records.RUNNING) or run.ended_at is None:
        return 0.0
    since = run.checkpoints[-1] if run.checkpoints else (run.executing_at or run.began_at)
    return max(0.0, run.ended_at - since)


def _machine(slot: Optional[str]) -> Optional[str]:
    """`slot1_1@host.example` -> `host.example`: the only site hint of a log without ads."""
    return slot.split("@", 1)[1] if slot and "@" in slot else slot


def _number(value) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        else None
