"""Right-sizing advice, as snakemake-executor-plugin-slurm's efficiency report gives it.

Per rule (per DAG node name prefix, or all jobs, in a log without job ads): the
largest request against the largest observed peak of the jobs that report one;
a request is flagged when the peak is below `threshold` of it (used too little:
ask for less, match sooner, waste less annex time), above it (a site that enforces
the request would hold the job), or when a job was held for exceeding it. The
suggestion is the peak plus `headroom`, rounded up to the resource's step; a held
job's peak may be cut short, so its request (which it exceeded) plus headroom is a floor.
A memory or disk suggestion also covers what a schedd's job ad shows at that peak: it rounds the resident
size and the disk usage up by as much as half (htcondor_codes.schedd_rounded), and a pool's
SYSTEM_PERIODIC_HOLD on `MemoryUsage > RequestMemory` or `DiskUsage > RequestDisk` judges those numbers
(a 49 MB peak reads 74 MB).
A memory peak is what HTCondor measured, and an execute point without per-job cgroups (BASE_CGROUP
empty: annexes and glideins run so, unprivileged) measures memory only in snapshots, one as the job
starts and then one each PID_SNAPSHOT_INTERVAL (15 s): a job that ran for less may be reported at
its start (a 100-MB peak held for 3 s read 5.8 MB on a 25.14.0 pool). Such a peak is a floor: it can
show a request too small, never one too large, so a group with a job that ran less than that is
flagged "unmeasured" instead of "low use", with no smaller request suggested. A job killed by SIGKILL
without a hold (failure_hints.killed_by_sigkill: an out-of-memory kill there) most likely needed more than
its node had, so more than its request: like a held job's, its request is a floor ("killed without a hold").
It is written in HTCondor's submit command and in Snakemake's resource name.
"""
import math
import re
from dataclasses import dataclass
from typing import Optional

from htcondor_codes import param_seconds, schedd_memory_usage_mb, schedd_rounded

from snakemake_executor_plugin_htcannex.ops.report.figures import JobFigures

DEFAULT_HEADROOM = 0.2
DEFAULT_THRESHOLD = 0.8
# (label, HTCondor submit command, Snakemake resource, JobFigures fields requested/peak, unit,
#  scale from the field's unit, step the suggestion is rounded up to)
_RESOURCES = (
    ("memory", "request_memory", "mem_mb", "memory_requested_mb", "memory_peak_mb", "MB", 1, 64),
    ("disk", "request_disk", "disk_mb", "disk_requested_kb", "disk_used_kb", "MB", 1 / 1024, 128),
    ("cpus", "request_cpus", "threads", "cpus_requested", "cpus_used", "", 1, 1),
)
# What a schedd's job ad shows for a peak (in the resource's unit, MB), which a hold policy on it judges.
_SHOWN_BY_THE_SCHEDD = {
    "memory": ("MemoryUsage", lambda peak_mb: schedd_memory_usage_mb(math.ceil(peak_mb * 1024))),
    "disk": ("DiskUsage", lambda peak_mb: schedd_rounded(math.ceil(peak_mb * 1024)) / 1024),
}


@dataclass
class Advice:
    group: str
    resource: str
    jobs: int  # jobs that reported a peak
    requested: Optional[float]  # the largest request, in `unit`
    peak: Optional[float]  # the largest peak, in `unit`
    use: Optional[float]  # peak / requested
    suggested: Optional[int]
    unit: str
    flag: str  # "" | "low use" | "unmeasured" | "over request" | "held for exceeding" | "killed without a hold"
    text: str


def advise(jobs: list, headroom: float = DEFAULT_HEADROOM, threshold: float = DEFAULT_THRESHOLD) -> list:
    groups: dict = {}
    for job in jobs:
        groups.setdefault(_group(job), []).append(job)
    advice = []
    snapshot_s = param_seconds("PID_SNAPSHOT_INTERVAL")
    for group, members in sorted(groups.items()):
        for resource in _RESOURCES:
            item = _advise(group, members, resource, headroom, threshold, snapshot_s)
            if item is not None:
                advice.append(item)
    return advice


def flagged(advice: list) -> list:
    return [item for item in advice if item.flag]


def _group(job: JobFigures) -> str:
    if job.rule:
        return job.rule
    if job.dag_node:
        # MLDAG/DAGMan node names carry their run and chunk after the kind: train_r1_c2 -> train
        return re.split(r"[-_.]", job.dag_node, maxsplit=1)[0]
    return "(all jobs)"


def _advise(group: str, jobs: list, resource: tuple, headroom: float, threshold: float,
            snapshot_s: float) -> Optional[Advice]:
    label, command, snakemake_name, requested_field, peak_field, unit, scale, step = resource
    requests = [getattr(job, requested_field) for job in jobs if getattr(job, requested_field) is not None]
    peaks = [getattr(job, peak_field) for job in jobs if getattr(job, peak_field) is not None]
    held = [job for job in jobs if getattr(job, f"{label}_holds", 0)]
    killed = [job for job in jobs if job.killed] if label == "memory" else []
    if not peaks and not held and not killed:
        return None
    requested = max(requests) * scale if requests else None
    peak = max(peaks) * scale if peaks else None
    # A held job exceeded its own request, and a killed one most likely did: that request is a floor.
    held_at = max((getattr(job, requested_field) * scale for job in held + killed
                   if getattr(job, requested_field) is not None), default=None)
    use = peak / requested if peak is not None and requested else None
    floor = [value for value in (peak, held_at) if value is not None]
    wanted = max(floor) * (1 + headroom) if floor else None
    shown_as, shown = _SHOWN_BY_THE_SCHEDD.get(label, (None, None))
    rounded = shown(peak) if shown is not None and peak is not None else None
    if rounded is not None and rounded > wanted:
        wanted = rounded
    suggested = max(step, step * math.ceil(wanted / step)) if wanted is not None else None
    # Low use is worth a change only where the suggestion asks for less.
    # Over the request as a site enforces it: the peak itself (a cgroup limit), or what the schedd shows for it
    # (a policy on MemoryUsage or DiskUsage).
    over = (use is not None and use > 1) or (rounded is not None and requested is not None and rounded > requested)
    low_use = use is not None and use < threshold and suggested < requested
    # Memory from snapshots (module doc): a job that ran shorter than one interval has a floor, not a peak.
    unmeasured = [job for job in jobs if getattr(job, peak_field) is not None
                  and (job.longest_run_s is None or job.longest_run_s < snapshot_s)] if label == "memory" else []
    flag = ("held for exceeding" if held else "killed without a hold" if killed else "over request" if over
            else "unmeasured" if low_use and unmeasured else "low use" if low_use else "")
    if flag == "unmeasured":
        suggested = None
        text = (f"{group}: {label} peak {_fmt(peak, unit)} of {_fmt(requested, unit)} requested ({use:.0%}); "
                f"{len(unmeasured)} of {len(peaks)} job(s) ran less than {snapshot_s:.0f} s, shorter than the "
                "memory snapshots of an execute point without per-job cgroups (PID_SNAPSHOT_INTERVAL), so "
                "their peaks may be their start: no smaller request_memory is suggested from them")
    else:
        text = (f"{group}: {label} peak {_fmt(peak, unit)} of {_fmt(requested, unit)} requested"
                + (f" ({use:.0%})" if use is not None else "")
                + (f", {len(held)} job(s) held for exceeding {_fmt(held_at, unit)}" if held else "")
                + (f", {len(killed)} job(s) killed by SIGKILL without a hold (an out-of-memory kill where no "
                   "per-job cgroup holds; memory measured in snapshots there, so the peak may be higher)"
                   if killed else "")
                + (f"; suggest {command} = {suggested}{unit} (Snakemake: {snakemake_name}={suggested})"
                   if suggested is not None and flag else "")
                + (f"; the schedd shows this peak as {shown_as} {_fmt(rounded, unit)}, which a hold policy on it "
                   "judges" if rounded is not None and rounded == wanted and flag else ""))
    return Advice(group=group, resource=label, jobs=len(peaks), requested=requested, peak=peak, use=use,
                  suggested=suggested, unit=unit, flag=flag, text=text)


def _fmt(value: Optional[float], unit: str) -> str:
    if value is None:
        return "?"
    return f"{value:.0f} {unit}".strip() if value >= 10 else f"{value:.2f} {unit}".strip()
