"""Memory of running jobs, in one place: how it is measured, which limit holds or kills a job, and
what the job ad and the user log say of it.

Real pools differ here (HTCondor 25 manual, admin-manual/configuration/starter.rst), and a workflow
must survive each; the pool is configured by HTCondor's own macro names (policy.py reads them):
- CGROUP_MEMORY_LIMIT_POLICY = hard (the default): the starter's cgroup limit holds the job with
  34/102 (JobOutOfResources, memory). `none`: nothing is enforced by the starter.
- BASE_CGROUP = "" (an execute point without per-job cgroups, as an unprivileged annex or glidein
  runs; default `htcondor`; an annex's slots have none unless created with them, slots.Annex.cgroups):
  no cgroup limit, and a job's memory is what the procd's snapshots saw: one as the job starts
  (src/condor_procd/proc_family_monitor.cpp, register_subfamily), then all jobs' on one clock each
  PID_SNAPSHOT_INTERVAL seconds (default 15), none after the job's last: a 100-MB peak held for 3 s
  was reported at the job's 5.8-MB start on a 25.14.0 pool, as was the same peak from 3 s to 5 s
  after the start in about half of the tries (the clock's phase). With a cgroup the starter reads
  its memory.peak (src/condor_utils/proc_family_direct_cgroup_v2.cpp): the pool samples memory every
  MEMORY_SAMPLE_S.
- An annex's slot is its pilot's batch job, whose memory the batch system's out-of-memory killer
  enforces: a job whose tree holds more than the slot's memory loses its largest process to SIGKILL,
  and HTCondor sees only the job end by the signal (JobMemory.out_of_memory_kill).
- Local-universe jobs are not measured or limited (LOCAL_UNIVERSE_CGROUP_ENFORCEMENT is false).
"""
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import classad2
import psutil
from htcondor_codes import MEMORY_USAGE, PARAM_DEFAULTS_S

from .jobads import set_rounded

MEMORY_SAMPLE_S = 0.1  # how often a job with a cgroup is measured
LIMIT_POLICIES = ("hard", "none")
DEFAULT_BASE_CGROUP = "htcondor"
MACROS = ("CGROUP_MEMORY_LIMIT_POLICY", "BASE_CGROUP", "PID_SNAPSHOT_INTERVAL")


@dataclass(frozen=True)
class MemoryPolicy:
    limit: str = "hard"  # CGROUP_MEMORY_LIMIT_POLICY
    cgroups: bool = True  # whether the pool's own slots give each job a cgroup (BASE_CGROUP not "")
    snapshot_interval_s: float = PARAM_DEFAULTS_S["PID_SNAPSHOT_INTERVAL"]

    @classmethod
    def from_config(cls, config: dict) -> "MemoryPolicy":
        """From the pool's macros; a bad value is a ValueError naming the macro and the fix."""
        limit = config.get("CGROUP_MEMORY_LIMIT_POLICY", "hard")
        if limit not in LIMIT_POLICIES:
            raise ValueError(f"pool config: CGROUP_MEMORY_LIMIT_POLICY = {limit!r}; "
                             f"use one of {', '.join(LIMIT_POLICIES)}")
        interval = config.get("PID_SNAPSHOT_INTERVAL", PARAM_DEFAULTS_S["PID_SNAPSHOT_INTERVAL"])
        try:
            seconds = float(str(interval))  # a number, or its text as a condor_config has it
        except ValueError:
            seconds = 0.0
        if isinstance(interval, bool) or not seconds > 0:
            raise ValueError(f"pool config: PID_SNAPSHOT_INTERVAL = {interval!r}; use a number of seconds above 0")
        return cls(limit, config.get("BASE_CGROUP", DEFAULT_BASE_CGROUP) != "", seconds)


@dataclass
class JobMemory:
    """One run's memory as its starter sees it (a self-checkpointing job's restarts keep it)."""

    cgroups: bool = True  # whether its slot gives it a per-job cgroup
    # An annex job's: the memory of the batch job the annex's pilot runs in (None: no such limit).
    allocation_mb: int | None = None
    peak_kib: int = 0
    reported_kib: int = 0  # what its ad and log last said
    snapshot_at_start: bool = False  # without cgroups: the procd measured it as it started

    def measure(self, pid: int) -> int:
        """Resident memory of the job's whole process tree in KiB (what a cgroup would charge)."""
        total = sum(rss for rss, _ in _resident(pid)) // 1024
        self.peak_kib = max(self.peak_kib, total)
        return total

    def out_of_memory_kill(self, pid: int) -> bool:
        """Where the job's tree holds more than its allocation, kill its largest process with SIGKILL, as
        the kernel's out-of-memory killer does in a batch job's memory cgroup (Slurm's task/cgroup with
        ConstrainRAMSpace: the victim is the process with the highest badness, mm/oom_kill.c
        oom_badness, i.e. the most resident memory); True when it did. Not counted in the job's peak,
        which HTCondor measures."""
        if self.allocation_mb is None:
            return False
        sizes = _resident(pid)
        if sum(rss for rss, _ in sizes) // 2**20 <= self.allocation_mb:
            return False
        try:
            max(sizes, key=lambda size: size[0])[1].send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
        return True


def for_slot(policy: MemoryPolicy, slot: classad2.ClassAd, annex_cgroups: bool | None) -> JobMemory:
    """A new run's memory limits on `slot`; `annex_cgroups` is its annex's cgroups flag, None for an
    ordinary slot. An annex's slot is its pilot's batch job (static slots: one job each)."""
    if annex_cgroups is None:
        return JobMemory(cgroups=policy.cgroups)
    return JobMemory(cgroups=annex_cgroups, allocation_mb=slot["Memory"])


def record(ad: classad2.ClassAd, resident_kib: int) -> None:
    """Resident memory into the job ad as the schedd keeps it: rounded, and MemoryUsage (MB) an expression of
    the rounded value, which a memory policy on MemoryUsage judges. The pool's ImageSize is the resident size."""
    set_rounded(ad, "ResidentSetSize", resident_kib)
    set_rounded(ad, "ImageSize", resident_kib)
    ad["MemoryUsage"] = classad2.ExprTree(MEMORY_USAGE)


class MemoryWatch:
    """When the running jobs' memory is measured: with cgroups at most every MEMORY_SAMPLE_S, as
    memory.peak sees it; without, the procd's snapshots: each job as it starts, and all of them on
    one clock each PID_SNAPSHOT_INTERVAL."""

    def __init__(self, policy: MemoryPolicy):
        self.policy = policy
        self._last_sample = 0.0
        self._next_snapshot = 0.0
        self.sampling = self.snapshotting = False

    def begin_pass(self, now: float) -> None:
        self.sampling = now - self._last_sample >= MEMORY_SAMPLE_S
        if self.sampling:
            self._last_sample = now
        self.snapshotting = now >= self._next_snapshot
        if self.snapshotting:
            self._next_snapshot = now + self.policy.snapshot_interval_s

    def over_limit(self, ad: classad2.ClassAd, pid: int, memory: JobMemory, log_image_size) -> str | None:
        """Measure the job if it is due; its memory into its ad and log (`log_image_size`) when it grew.
        Returns the hold reason when a hard cgroup limit holds the job (34/102), else None."""
        if memory.cgroups:
            due = self.sampling
        else:
            due = self.snapshotting or not memory.snapshot_at_start
            memory.snapshot_at_start = True
        if not due:
            return None
        rss_kib = memory.measure(pid)
        if rss_kib > memory.reported_kib * 1.1:
            memory.reported_kib = rss_kib
            record(ad, rss_kib)
            # The event carries what the starter measured (seen on a 25.14.0 pool), not the rounded ad.
            log_image_size(rss_kib, -(-rss_kib // 1024), rss_kib)
        if memory.cgroups and self.policy.limit == "hard" and rss_kib / 1024 > ad["RequestMemory"]:
            return (f"Job has gone over cgroup memory limit of {ad['RequestMemory']} megabytes. "
                    f"Peak usage: {memory.peak_kib // 1024} megabytes.  "
                    "Consider resubmitting with a higher request_memory.")
        return None

    def out_of_memory_kill(self, pid: int, memory: JobMemory) -> bool:
        """At each sample, the batch job's out-of-memory killer (JobMemory.out_of_memory_kill)."""
        return self.sampling and memory.out_of_memory_kill(pid)


def _resident(pid: int) -> list[tuple[int, psutil.Process]]:
    """(resident bytes, process) of each live process of the tree under `pid`."""
    sizes = []
    for process in _tree(pid):
        try:
            sizes.append((process.memory_info().rss, process))
        except psutil.NoSuchProcess:
            pass
    return sizes


def _tree(pid: int) -> list[psutil.Process]:
    """The process and its descendants. Each process's threads list their children in
    /proc/<pid>/task/<tid>/children: a few reads for a job's tree, where psutil's children()
    reads every process's stat on the machine (4 ms per job and memory sample, 90 processes).
    Without that file (a kernel built without CONFIG_PROC_CHILDREN), psutil's way."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        children = [int(child) for task in tasks
                    for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    except FileNotFoundError:
        if not os.path.exists(f"/proc/{pid}"):
            return []  # it has exited
        try:
            root = psutil.Process(pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []
    except (ProcessLookupError, PermissionError):
        return []
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return []
    return [root, *(process for child in children for process in _tree(child))]
