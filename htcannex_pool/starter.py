"""Runs one job as a real process, as HTCondor's condor_starter does.

The process gets its own session (so killing it takes its whole tree, and
killing the client or the daemon's terminal does not reach it), cwd = the
sandbox (or Iwd without file transfer), the environment the job asked for plus
what the starter sets (`_CONDOR_SCRATCH_DIR`, `TMPDIR`, `OMP_NUM_THREADS`, ...),
and stdout/stderr captured in the sandbox for transfer back.
"""
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import classad2
import psutil
from htcondor_codes import WANT_FT_ON_CHECKPOINT

from . import disk, jobads, transfer


@dataclass
class RunningJob:
    key: tuple[int, int]
    process: subprocess.Popen
    sandbox: Path
    slot_name: str
    started: float
    create_time: float  # with the pid, identifies the process after a daemon restart
    inputs_before: dict = field(default_factory=dict)
    peak_rss_kib: int = 0
    reported_rss_kib: int = 0
    cgroups: bool = True  # whether its slot gives it a per-job cgroup (policy.py), set as it starts
    # An annex job's: the memory of the batch job the annex's pilot runs in, which the batch system's
    # out-of-memory killer enforces (None: no such limit). Set as it starts.
    allocation_mb: int | None = None
    snapshot_at_start: bool = False  # without cgroups: the procd measured it as it started (policy.py)
    stopping: str | None = None  # why the pool killed it, if it did
    cpu_seconds: tuple[float, float] = (0.0, 0.0)  # (user, system) of the job's tree, once reaped
    bytes_received: int = 0  # brought into the sandbox by the input transfer
    kill_at: float | None = None  # a removed local-universe job: when its vacate time is up

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def _reap(self, options: int) -> int | None:
        """Collect the exit status with the CPU the process and the children it waited for
        used (wait4's rusage, what HTCondor's starter reports as the job's remote usage)."""
        if self.process.returncode is None:
            try:
                pid, status, usage = os.wait4(self.process.pid, options)
            except ChildProcessError:  # reaped elsewhere: no usage to report
                return self.process.poll()
            if pid == 0:
                return None
            self.cpu_seconds = (usage.ru_utime, usage.ru_stime)
            self.process.returncode = os.waitstatus_to_exitcode(status)
        return self.process.returncode

    def disk_kib(self) -> int:
        """What the job's sandbox holds now, in KiB (the starter's DiskUsage)."""
        return disk.size_kib(self.sandbox)

    def rss_kib(self) -> int:
        """Resident memory of the job's whole process tree (what a cgroup would charge)."""
        total = sum(rss for rss, _ in _resident(self.process.pid)) // 1024
        self.peak_rss_kib = max(self.peak_rss_kib, total)
        return total

    def out_of_memory_kill(self) -> bool:
        """Where the job's tree holds more than its allocation, kill its largest process with SIGKILL, as
        the kernel's out-of-memory killer does in a batch job's memory cgroup (Slurm's task/cgroup with
        ConstrainRAMSpace: the victim is the process with the highest badness, mm/oom_kill.c
        oom_badness, i.e. the most resident memory); True when it did. HTCondor does not see it: the
        job ends by the signal (or its shell's 137), with no hold. Not counted in the job's peak, which
        HTCondor measures (policy.py)."""
        if self.allocation_mb is None:
            return False
        sizes = _resident(self.process.pid)
        if sum(rss for rss, _ in sizes) // 2**20 <= self.allocation_mb:
            return False
        try:
            max(sizes, key=lambda size: size[0])[1].send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
        return True

    def kill(self, why: str):
        self.stopping = why
        kill_process_group(self.process.pid)
        self._reap(0)


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


def kill_process_group(pid: int):
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_leftover(pid: int, create_time: float):
    """Kill a job process a previous daemon left running, if it is really that process."""
    try:
        process = psutil.Process(pid)
        if abs(process.create_time() - create_time) < 0.01:
            kill_process_group(pid)
    except psutil.NoSuchProcess:
        pass


def _environment(job: classad2.ClassAd, slot: classad2.ClassAd, scratch: Path) -> dict[str, str]:
    environment = jobads.environment_of(job)
    cpus = str(job.get("RequestCpus", 1))
    environment.update({
        "_CONDOR_SCRATCH_DIR": str(scratch), "TMPDIR": str(scratch), "TEMP": str(scratch),
        "TMP": str(scratch), "_CONDOR_SLOT": slot["Name"].split("@")[0],
        "_CONDOR_JOB_AD": str(scratch / transfer.JOB_AD),
        "_CONDOR_MACHINE_AD": str(scratch / transfer.MACHINE_AD),
        "OMP_NUM_THREADS": cpus, "MKL_NUM_THREADS": cpus, "BATCH_SYSTEM": "HTCondor",
    })
    if job.get("RequestGPUs", 0):
        environment["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(job["RequestGPUs"]))
    return environment


def launch(job: classad2.ClassAd, slot: classad2.ClassAd, sandbox: Path,
           inputs_before: dict, watch_exit: Callable[[int], None]) -> RunningJob:
    """Start the job's process. `sandbox` is the scratch directory; it is also the cwd,
    except without file transfer (shared filesystem), where the job runs in Iwd.
    `watch_exit` is given the process's pid, to say when it exits (exits.ExitWatch)."""
    iwd = Path(job["Iwd"])
    transfers = job["ShouldTransferFiles"] == "YES"
    executable = Path(job["Cmd"])
    if transfers and job.get("TransferExecutable", True):
        executable = sandbox / executable.name
    # In the old ClassAd syntax (one `Name = value` a line), as the starter writes both files.
    (sandbox / transfer.JOB_AD).write_text(job.printOld())
    (sandbox / transfer.MACHINE_AD).write_text(slot.printOld())

    def stream(path: Path, mode: str, name: str):
        return subprocess.DEVNULL if name == "/dev/null" else streams.enter_context(open(path, mode))

    # The child has its own copies of the descriptors; ours close when Popen returns.
    with contextlib.ExitStack() as streams:
        if transfers:
            # A self-checkpointing job's restart in its sandbox appends to what its runs wrote
            # (vanilla_proc.cpp outputOpenFlags: O_APPEND without O_TRUNC for WantFTOnCheckpoint).
            mode = "ab" if job.get(WANT_FT_ON_CHECKPOINT) is True else "wb"
            stdout = stream(sandbox / transfer.STDOUT, mode, transfer.STDOUT)
            stderr = stream(sandbox / transfer.STDERR, mode, transfer.STDERR)
        else:
            stdout = stream(iwd / job["Out"], "ab", job["Out"])
            stderr = stream(iwd / job["Err"], "ab", job["Err"])
        process = subprocess.Popen([str(executable), *jobads.arguments_of(job)],
                                   cwd=sandbox if transfers else iwd,
                                   env=_environment(job, slot, sandbox),
                                   stdin=stream(iwd / job["In"], "rb", job["In"]),
                                   stdout=stdout, stderr=stderr, start_new_session=True)
    watch_exit(process.pid)
    return RunningJob(key=(job["ClusterId"], job["ProcId"]), process=process, sandbox=sandbox,
                      slot_name=slot["Name"], started=time.time(),
                      create_time=psutil.Process(process.pid).create_time(), inputs_before=inputs_before)

