"""Runs one job as a real process, as HTCondor's condor_starter does.

The process gets its own session (so killing it takes its whole tree, and
killing the client or the daemon's terminal does not reach it), cwd = the
sandbox (or Iwd without file transfer), the environment the job asked for plus
what the starter sets (`_CONDOR_SCRATCH_DIR`, `TMPDIR`, `OMP_NUM_THREADS`, ...),
and stdout/stderr captured in the sandbox for transfer back.
"""
import contextlib
import errno
import glob
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

from . import disk, jobads, memory, transfer
from .memory import JobMemory


@dataclass
class RunningJob:
    key: tuple[int, int]
    process: subprocess.Popen
    sandbox: Path
    slot_name: str
    started: float
    create_time: float  # with the pid, identifies the process after a daemon restart
    inputs_before: dict = field(default_factory=dict)
    memory: JobMemory = field(default_factory=JobMemory)  # its limits are set as it starts on a slot
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

    def kill(self, why: str):
        self.stopping = why
        kill_process_group(self.process.pid)
        self._reap(0)


def record_usage(ad: classad2.ClassAd, running: RunningJob):
    """What the run used, into the job ad as the starter reports it: CPU seconds of this run
    (RemoteUserCpu/RemoteSysCpu) and of all runs (Cumulative*), average cores (CpusUsage),
    peak memory (ResidentSetSize, KiB, and MemoryUsage) and sandbox size (DiskUsage, KiB)."""
    user, system = running.cpu_seconds
    wall = max(time.time() - running.started, 1e-3)
    ad.update({"RemoteUserCpu": user, "RemoteSysCpu": system,
               "CumulativeRemoteUserCpu": ad.get("CumulativeRemoteUserCpu", 0.0) + user,
               "CumulativeRemoteSysCpu": ad.get("CumulativeRemoteSysCpu", 0.0) + system,
               "CpusUsage": round((user + system) / wall, 2)})
    memory.record(ad, max(ad.get("ResidentSetSize_RAW", 0), running.memory.peak_kib))
    jobads.set_rounded(ad, "DiskUsage", max(ad.get("DiskUsage_RAW", 0), running.disk_kib()))


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


def machine_gpus() -> int:
    """The NVIDIA GPUs this machine really has (their device files)."""
    return len(glob.glob("/dev/nvidia[0-9]*"))


def _refuse_what_the_pool_cannot_give(job: classad2.ClassAd) -> None:
    """Raise OSError (the job is held, code 6) for a job that asks for what a slot declares and this machine
    cannot give: run without it, the job would succeed with the host's software or without its GPUs, a
    silent wrong result. A slot declares a container runtime only when told to (slots.py), and an annex's
    slots have the GPUs of the site they play (the catalogue's)."""
    if job.get("WantContainer", False):
        raise OSError(errno.ENOEXEC, "the embedded pool runs no container image: this slot declares a runtime "
                                     "(containers=True) for tests of the submit path only")
    wanted, present = job.get("RequestGPUs", 0), machine_gpus()
    if wanted > present:
        raise OSError(errno.ENODEV, f"the job asks for {wanted} GPU(s) and this machine has {present}: the slot "
                                    "plays a site with GPUs, and a job does not run without the GPUs it asked for")


def launch(job: classad2.ClassAd, slot: classad2.ClassAd, sandbox: Path,
           inputs_before: dict, watch_exit: Callable[[int], None]) -> RunningJob:
    """Start the job's process. `sandbox` is the scratch directory; it is also the cwd,
    except without file transfer (shared filesystem), where the job runs in Iwd.
    `watch_exit` is given the process's pid, to say when it exits (exits.ExitWatch)."""
    _refuse_what_the_pool_cannot_give(job)
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

