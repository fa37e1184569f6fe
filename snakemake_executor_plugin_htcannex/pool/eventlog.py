"""HTCondor user event log entries, in the text format `htcondor2.JobEventLog` reads.

Many jobs share one log (the plugin uses one per workflow, as DAGMan does), so
each event is appended under an exclusive `flock`, as the shadows of a real
schedd do. Event numbers and wording follow HTCondor's `condor_event.cpp`.
"""
import fcntl
import logging
import time
from pathlib import Path

import classad2

HOST = "<127.0.0.1:0?alias=embedded-pool>"
_ZERO_USAGE = "Usr 0 00:00:00, Sys 0 00:00:00"
_daemon_log = logging.getLogger("htcannex.pool")


def _usage_lines(*labels: str) -> list[str]:
    return [f"\t\t{_ZERO_USAGE}  -  {label}" for label in labels]


def _bytes_lines(*labels: str) -> list[str]:
    return [f"\t0  -  {label}" for label in labels]


def open_log(path: str):
    """Open a user log for appending (creating its directory); OSError says why it cannot be."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return open(path, "a")


class UserLog:
    """Writes events of one job to the log named by its ad's `UserLog`."""

    def __init__(self, job: classad2.ClassAd):
        self._path = job.get("UserLog")
        self._id = f"({job['ClusterId']:03d}.{job['ProcId']:03d}.000)"

    def _write(self, number: int, headline: str, body: list[str] = ()):
        if not self._path:
            return
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        text = "\n".join([f"{number:03d} {self._id} {stamp} {headline}", *body, "...", ""])
        try:
            with open_log(self._path) as log:
                fcntl.flock(log, fcntl.LOCK_EX)
                try:
                    log.write(text)
                    # flush before unlocking so appends of other writers never interleave
                    log.flush()
                finally:
                    fcntl.flock(log, fcntl.LOCK_UN)
        except OSError as error:
            # The job goes on, as under a real shadow that cannot write the log.
            _daemon_log.warning("cannot write event %03d %s to %s: %s", number, self._id, self._path, error)

    def submitted(self):
        self._write(0, f"Job submitted from host: {HOST}")

    def executing(self, slot: classad2.ClassAd, scratch_dir: str):
        # HTCondor 23+ writes the slot's resources (and AnnexName) as a ClassAd
        # body after SlotName; the parser exposes it as `ExecuteProps`.
        properties = {"CondorScratchDir": scratch_dir, "Cpus": slot["Cpus"],
                      "Memory": slot["Memory"], "GPUs": slot.get("GPUs", 0)}
        if slot.get("AnnexName"):
            properties["AnnexName"] = slot["AnnexName"]
        body = [f"\tSlotName: {slot['Name']}"]
        body += [f"\t{name} = {_literal(value)}" for name, value in properties.items()]
        self._write(1, f"Job executing on host: {HOST}", body)

    def transfer(self, direction: str, finished: bool):
        """direction: 'input' or 'output'."""
        self._write(40, f"{'Finished' if finished else 'Started'} transferring {direction} files",
                    [] if finished else [f"\tTransferring to host: {HOST}"])

    def image_size(self, image_kib: int, memory_mb: int, rss_kib: int):
        self._write(6, f"Image size of job updated: {image_kib}",
                    [f"\t{memory_mb}  -  MemoryUsage of job (MB)",
                     f"\t{rss_kib}  -  ResidentSetSize of job (KB)"])

    def held(self, reason: str, code: int, subcode: int):
        # The reason is one line in the log format; a newline would end the event early.
        self._write(12, "Job was held.",
                    [f"\t{' '.join(reason.split())}", f"\tCode {code} Subcode {subcode}"])

    def released(self, reason: str):
        self._write(13, "Job was released.", [f"\t{reason}"])

    def evicted(self):
        self._write(4, "Job was evicted.",
                    ["\t(0) Job was not checkpointed.",
                     *_usage_lines("Run Remote Usage", "Run Local Usage"),
                     *_bytes_lines("Run Bytes Sent By Job", "Run Bytes Received By Job")])

    def requeued_after_exit(self, return_value: int):
        """The job exited but its exit policy (max_retries) puts it back in the queue."""
        self._write(4, "Job was evicted.",
                    ["\t(0) Job terminated and was requeued",
                     *_usage_lines("Run Remote Usage", "Run Local Usage"),
                     *_bytes_lines("Run Bytes Sent By Job", "Run Bytes Received By Job"),
                     f"\t(1) Normal termination (return value {return_value})"])

    def aborted(self, reason: str):
        self._write(9, "Job was aborted.", [f"\t{reason}"])

    def terminated(self, return_value: int | None, signal: int | None = None):
        status = ([f"\t(1) Normal termination (return value {return_value})"] if signal is None
                  else [f"\t(0) Abnormal termination (signal {signal})", "\t(0) No core file"])
        self._write(5, "Job terminated.",
                    [*status,
                     *_usage_lines("Run Remote Usage", "Run Local Usage",
                                   "Total Remote Usage", "Total Local Usage"),
                     *_bytes_lines("Run Bytes Sent By Job", "Run Bytes Received By Job",
                                   "Total Bytes Sent By Job", "Total Bytes Received By Job")])


def _literal(value) -> str:
    """A Python value written as a ClassAd literal (strings quoted and escaped)."""
    return str(classad2.ClassAd({"x": value}).lookup("x"))
