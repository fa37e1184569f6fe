"""HTCondor user event log entries, in the text format `htcondor2.JobEventLog` reads.

Many jobs share one log (the plugin uses one per workflow, as DAGMan does), so
each event is appended under an exclusive `flock`, as the shadows of a real
schedd do. Event numbers and wording follow HTCondor's `condor_event.cpp`.
"""
import fcntl
import functools
import logging
import time
from pathlib import Path

import classad2

from .permissions import writable_by

HOST = "<127.0.0.1:0?alias=embedded-pool>"
# The resources of the terminated and evicted events' table (setEventUsageAd's default
# ProvisionedResources, plus GPUs where a job asked for them), with the table's labels.
_TABLE_RESOURCES = (("Cpus", "Cpus"), ("Disk", "Disk (KB)"), ("GPUs", "Gpus (Average)"), ("Memory", "Memory (MB)"))
_daemon_log = logging.getLogger("htcannex.pool")


def _rusage(seconds: tuple[float, float]) -> str:
    """(user, system) CPU seconds as formatRusage writes them: "Usr D HH:MM:SS, Sys D HH:MM:SS"."""
    parts = []
    for label, value in zip(("Usr", "Sys"), seconds):
        value = int(value)
        parts.append(f"{label} {value // 86400} {value % 86400 // 3600:02d}:{value % 3600 // 60:02d}:{value % 60:02d}")
    return ", ".join(parts)


def _usage_lines(job: classad2.ClassAd, *scopes: str) -> list[str]:
    """CPU seconds as the shadow writes them: "Run" from the ad's RemoteUserCpu/RemoteSysCpu
    (this run), "Total" from CumulativeRemoteUserCpu/CumulativeRemoteSysCpu; local: none."""
    lines = []
    for scope in scopes:
        prefix = "Remote" if scope == "Run" else "CumulativeRemote"
        remote = (job.get(f"{prefix}UserCpu", 0), job.get(f"{prefix}SysCpu", 0))
        lines += [f"\t\t{_rusage(remote)}  -  {scope} Remote Usage", f"\t\t{_rusage((0, 0))}  -  {scope} Local Usage"]
    return lines


def _bytes_lines(job: classad2.ClassAd, run_bytes: tuple[float, float], *scopes: str) -> list[str]:
    """Bytes (sent, received) by the job: "Run" this run's, "Total" every run's (the ad's
    BytesSent/BytesRecvd, cumulative as the shadow keeps them)."""
    lines = []
    for scope in scopes:
        sent, received = run_bytes if scope == "Run" else (job.get("BytesSent", 0), job.get("BytesRecvd", 0))
        lines += [f"\t{sent:.0f}  -  {scope} Bytes Sent By Job", f"\t{received:.0f}  -  {scope} Bytes Received By Job"]
    return lines


def _table_value(value) -> str:
    # formatUsageAd: "%.2f" only where there is a fraction, else an integer
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.2f}"
    return "" if value is None else str(int(value))


def _shadow_copy(job: classad2.ClassAd) -> classad2.ClassAd:
    """The job ad as the shadow that writes the event holds it: what the starter reported, not the schedd's
    rounding of it (<name>_RAW; a 25.14.0 event's Memory usage was 6 MB where the schedd's ad said 8)."""
    shadows = classad2.parseOne(repr(job))
    for name in [name for name in job.keys() if name.endswith("_RAW")]:
        shadows[name[:-len("_RAW")]] = job[name]
    return shadows


def usage_table(job: classad2.ClassAd) -> list[str]:
    """The "Partitionable Resources" table of the job's ad, laid out as condor_event.cpp's
    formatUsageAd does (columns widened to fit, integers padded to line up with fractions)."""
    rows = []
    shadows = _shadow_copy(job)
    for name, label in _TABLE_RESOURCES:
        if name == "GPUs" and not job.get("RequestGPUs"):
            continue
        # Evaluated: MemoryUsage, and a RequestDisk left to condor_submit's default, are expressions.
        rows.append([label] + [_table_value(shadows.eval(attribute) if attribute in shadows else None)
                               for attribute in (f"{name}Usage", f"Request{name}", f"{name}Provisioned")])
    for column in (1, 2, 3):
        if any("." in row[column] for row in rows):
            for row in rows:
                row[column] += "   " if row[column].isdigit() else ""
    use, request, allocated = (max([8] + [len(row[column]) for row in rows]) for column in (1, 2, 3))
    allocated = max(allocated, 9)
    lines = [f"\tPartitionable Resources : {'Usage':>{use}} {'Request':>{request}} {'Allocated':>{allocated}} "]
    width = max(len("Memory (MB)") + 1, *(len(row[0]) for row in rows)) + 8
    lines += [f"\t   {row[0]:<{width}} : {row[1]:>{use}} {row[2]:>{request}} {row[3]:>{allocated}} " for row in rows]
    return lines


def open_log(path: str):
    """Open a user log for appending (creating its directory); OSError says why it cannot be."""
    try:
        return open(path, "a")
    except FileNotFoundError:  # its directory is made once, not looked for at every event
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return open(path, "a")


class UserLog:
    """Writes events of one job to the log named by its ad's `UserLog`."""

    def __init__(self, job: classad2.ClassAd):
        self._job = job
        self._path = job.get("UserLog")
        self._id = f"({job['ClusterId']:03d}.{job['ProcId']:03d}.000)"

    @functools.cached_property
    def writable(self) -> bool:
        """Whether the job's owner may write the log. A real shadow writes it as the owner; where the
        owner cannot, it writes nothing and the job runs on (seen on HTCondor 25.14: no log at all).
        Judged once per UserLog, which the scheduler makes for each change of a job's state."""
        return bool(self._path) and writable_by(self._job["Owner"], Path(self._path).parent)

    def _write(self, number: int, headline: str, body: list[str] = ()):
        if not self.writable:
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

    def executing(self, slot: classad2.ClassAd, scratch_dir: str, requested: str = ""):
        """What a 25.x shadow writes (remoteresource.cpp populateExecuteEvent, from the starter's
        publishStarterInfo): SlotName, then CondorScratchDir, the slot's MachineResources with their
        Available<resource> lists (compat_classad_util.cpp CopyMachineResources), and the machine
        attributes the job named in `ulog_execute_attrs` (`requested`), sorted case-insensitively."""
        properties = {"CondorScratchDir": _literal(scratch_dir)}
        for resource in slot.get("MachineResources", "Cpus Disk Memory").replace(",", " ").split():
            for name in (resource, f"Available{resource}"):
                if name in slot:
                    properties[name] = slot.lookup(name)
        for name in requested.replace(",", " ").split():
            if name in slot and name not in properties:
                properties[name] = slot.lookup(name)
        body = [f"\tSlotName: {slot['Name']}"]
        body += [f"\t{name} = {properties[name]}" for name in sorted(properties, key=str.lower)]
        self._write(1, f"Job executing on host: {HOST}", body)

    def transfer(self, direction: str, finished: bool):
        """direction: 'input' or 'output'. Only an input transfer's start names the host it goes to (seen on a real
        25.14.0 pool: an output transfer's start has no such line)."""
        self._write(40, f"{'Finished' if finished else 'Started'} transferring {direction} files",
                    [f"\tTransferring to host: {HOST}"] if direction == "input" and not finished else [])

    def image_size(self, image_kib: int, memory_mb: int, rss_kib: int):
        self._write(6, f"Image size of job updated: {image_kib}",
                    [f"\t{memory_mb}  -  MemoryUsage of job (MB)",
                     f"\t{rss_kib}  -  ResidentSetSize of job (KB)"])

    def held(self, reason: str, code: int, subcode: int):
        # The reason is one line in the log format; a line break would end the event early.
        self._write(12, "Job was held.",
                    [f"\t{' '.join(reason.splitlines())}", f"\tCode {code} Subcode {subcode}"])

    def released(self, reason: str):
        self._write(13, "Job was released.", [f"\t{reason}"])

    def evicted(self, run_bytes: tuple[float, float] = (0, 0)):
        """run_bytes: (sent, received) by the job in the run that ends here."""
        self._write(4, "Job was evicted.",
                    ["\t(0) CPU times", *_usage_lines(self._job, "Run"), *_bytes_lines(self._job, run_bytes, "Run"),
                     *usage_table(self._job)])

    def executing_locally(self):
        """A local-universe job starts on the access point itself: no slot."""
        self._write(1, f"Job executing on host: {HOST}")

    def requeued_after_exit(self, return_value: int | None, run_bytes: tuple[float, float] = (0, 0),
                            signal: int | None = None):
        """The job exited but its exit policy (max_retries, on_exit_remove) puts it back in the queue."""
        how = ([f"	(1) Normal termination (return value {return_value})"] if signal is None
               else [f"	(0) Abnormal termination (signal {signal})", "	(0) No core file"])
        self._write(4, "Job was evicted.",
                    ["	(0) Job terminated and was requeued", *_usage_lines(self._job, "Run"),
                     *_bytes_lines(self._job, run_bytes, "Run"), *how, *usage_table(self._job)])

    def aborted(self, reason: str):
        self._write(9, "Job was aborted.", [f"\t{reason}"])

    def terminated(self, return_value: int | None, signal: int | None = None,
                   run_bytes: tuple[float, float] = (0, 0)):
        status = ([f"\t(1) Normal termination (return value {return_value})"] if signal is None
                  else [f"\t(0) Abnormal termination (signal {signal})", "\t(0) No core file"])
        self._write(5, "Job terminated.",
                    [*status, *_usage_lines(self._job, "Run", "Total"), *_bytes_lines(self._job, run_bytes, "Run", "Total"),
                     *usage_table(self._job)])


def _literal(value) -> str:
    """A Python value written as a ClassAd literal (strings quoted and escaped)."""
    return str(classad2.ClassAd({"x": value}).lookup("x"))
