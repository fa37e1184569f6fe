"""The local universe: a job the access point runs itself, as the schedd's local starter does.

What of HTCondor's local universe is reproduced (manual: "Choosing an HTCondor
universe"; source: condor_schedd's local-job start, condor_starter's
JICLocalSchedd), and what is not:
- no matchmaking: an idle local job starts at the schedd's next pass
  (START_LOCAL_UNIVERSE is true by default); its Requirements are not evaluated;
- no sandbox and no file transfer: the job runs in its Iwd; `output`/`error`
  are opened there and truncated at every start, as the starter opens them
  (O_TRUNC); the starter's own scratch directory (`local_univ_execute/`, as
  LOCAL_UNIV_EXECUTE) holds the job ad (`_CONDOR_JOB_AD`) and is `_CONDOR_SCRATCH_DIR`;
- NumJobStarts counts starts (the local starter updates it; NumJobCompletions
  is a shadow's, and there is none);
- at exit the job policy decides (the starter's checkAtExit): `OnExitRemove`
  false requeues the job (an evicted event "terminated and was requeued") and it
  starts again;
- removal (condor_rm): the job gets its `RemoveKillSig` (default SIGTERM); it is
  killed once `JobMaxVacateTime` has passed; when its process has exited it
  leaves the queue: an evicted event (the local starter logs a removal so) and
  the schedd's aborted event;
- memory is not enforced (LOCAL_UNIVERSE_CGROUP_ENFORCEMENT defaults to false);
- a schedd restart (the pool daemon stopping) shuts the job down as the starter
  does (its RemoveKillSig if set, else its KillSig; SIGKILL after the vacate
  time) and it is evicted; the next start marks it idle and runs it again
  (mark_jobs_idle: a local job cannot reconnect).
"""
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import classad2
import psutil

from . import jobads, starter, transfer

UNIVERSE = 12  # CONDOR_UNIVERSE_LOCAL
SCRATCH_ROOT = "local_univ_execute"
SLOT_NAME = "local"  # RunningJob's slot name: the access point itself, not a slot
DEFAULT_VACATE_S = 10  # MachineMaxVacateTime's default


def is_local(ad: classad2.ClassAd) -> bool:
    return ad.get("JobUniverse") == UNIVERSE


def launch(job: classad2.ClassAd, scratch: Path, watch_exit: Callable[[int], None]) -> starter.RunningJob:
    """Start the job's process in its Iwd; `scratch` is the starter's directory for it."""
    iwd = Path(job["Iwd"])
    scratch.mkdir(parents=True)
    (scratch / transfer.JOB_AD).write_text(repr(job) + "\n")
    environment = jobads.environment_of(job)
    environment.update({"_CONDOR_SCRATCH_DIR": str(scratch), "_CONDOR_JOB_AD": str(scratch / transfer.JOB_AD),
                        "TMPDIR": str(scratch), "BATCH_SYSTEM": "HTCondor"})

    def opened(attribute: str, mode: str):
        name = job[attribute]
        return subprocess.DEVNULL if name == "/dev/null" else open(iwd / name, mode)

    streams = [opened("In", "rb"), opened("Out", "wb"), opened("Err", "wb")]
    try:
        process = subprocess.Popen([job["Cmd"], *jobads.arguments_of(job)], cwd=iwd, env=environment,
                                   stdin=streams[0], stdout=streams[1], stderr=streams[2],
                                   start_new_session=True)
    finally:
        for stream in streams:
            if stream is not subprocess.DEVNULL:
                stream.close()
    watch_exit(process.pid)
    return starter.RunningJob(key=(job["ClusterId"], job["ProcId"]), process=process, sandbox=scratch,
                              slot_name=SLOT_NAME, started=time.time(),
                              create_time=psutil.Process(process.pid).create_time())


def _signal(name) -> signal.Signals:
    return getattr(signal.Signals, str(name).upper(), signal.SIGTERM)


def signal_removal(job: classad2.ClassAd, running: starter.RunningJob, reason: str) -> None:
    """condor_rm of a running local job: its RemoveKillSig now, SIGKILL after its vacate time."""
    number = _signal(job.get("RemoveKillSig", "SIGTERM"))
    running.stopping = reason
    running.kill_at = time.time() + job.get("JobMaxVacateTime", DEFAULT_VACATE_S)
    try:
        os.kill(running.process.pid, number)
    except ProcessLookupError:
        pass


def signal_shutdown(job: classad2.ClassAd, running: starter.RunningJob) -> float:
    """A schedd's graceful shutdown of a running local job: the starter sends its RemoveKillSig if it
    has one, else its KillSig (SIGTERM by default), and SIGKILLs it after the vacate time
    (os_proc.cpp ShutdownGraceful / ShutdownFast). Returns that time."""
    try:
        os.kill(running.process.pid, _signal(job.get("RemoveKillSig", job.get("KillSig", "SIGTERM"))))
    except ProcessLookupError:
        pass
    return time.time() + job.get("JobMaxVacateTime", DEFAULT_VACATE_S)


def has_exited(running: starter.RunningJob) -> bool:
    """Whether the job's process has exited (left unreaped for the scheduler)."""
    try:
        return os.waitid(os.P_PID, running.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # already reaped
        return True


def overdue(running: starter.RunningJob, now: float) -> bool:
    """A removed job that outlived its vacate time (its process group is then killed)."""
    return running.kill_at is not None and now >= running.kill_at


def removed_on_exit(job: classad2.ClassAd, returncode: int) -> bool:
    """The job policy at exit: whether the job leaves the queue (else it is requeued)."""
    if returncode < 0:
        job.update({"ExitBySignal": True, "ExitSignal": -returncode})
        if "ExitCode" in job:
            del job["ExitCode"]
    else:
        job.update({"ExitBySignal": False, "ExitCode": returncode})
    return "OnExitRemove" not in job or job.eval("OnExitRemove") is not False
