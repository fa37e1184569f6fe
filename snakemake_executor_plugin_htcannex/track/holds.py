"""What a hold means and what to change: one classification of (HoldReasonCode, HoldReasonSubCode,
HoldReason), used by the hold policy (event_log.py), the executor's retry and `htcannex why`.

Real pools hold the same fault with different codes (HTCondor's hold table,
docs/codes-other-values/hold-table.rst; measured on a 25.14 personal pool):
- memory over-use: 34/102 where cgroups enforce request_memory (34/0 before HTCondor named the
  resource in the subcode); elsewhere the admin's SYSTEM_PERIODIC_HOLD (26, subcode and reason text
  from SYSTEM_PERIODIC_HOLD_SUBCODE/_REASON, so only the reason says "memory") or the execute
  point's WANT_HOLD (21, by convention with subcode 102 as 34 uses it). A job's own periodic_hold
  (3) on memory counts too.
- disk over-use: 34/104, or the same policy holds with a disk reason (21/104).
- file transfer: 12 (output) / 13 (input), subcode the errno. 12 with EACCES is an output the
  submit side cannot write: the submit directory is not writable by the job's owner (HTCondor
  then also writes no user log). 12 with ENOENT: the command failed before writing a listed
  output. 12 with EEXIST (or "already exists"): an immutable OSDF object is already there.
"""
import enum
import errno
import re
from dataclasses import dataclass
from typing import Optional

from htcondor_codes import HoldCode, OutOfResources

# What a job's memory request is multiplied by when it is run again after a memory hold.
MEMORY_RETRY_FACTOR = 2
# Holds by an admin's or a user's policy expression: the subcode and reason are the policy's own.
POLICY_CODES = (HoldCode.JobPolicy, HoldCode.StartdHeldJob, HoldCode.SystemPolicy)
# A policy hold's reason is the admin's text (SYSTEM_PERIODIC_HOLD_REASON, WANT_HOLD_REASON): these
# words in it say which resource ("memory", MemoryUsage, request_memory, OOM; "disk", DiskUsage).
_MEMORY_WORDS = re.compile(r"memory|\bOOM\b", re.I)
_DISK_WORDS = re.compile(r"disk", re.I)


class HoldKind(enum.Enum):
    WAITING_FOR_ANNEX = "waiting for its annex"
    MEMORY = "memory"
    DISK = "disk"
    OUTPUT_OBJECT_EXISTS = "OSDF object exists"
    MISSING_OUTPUT = "missing output"
    SUBMIT_DIR_NOT_WRITABLE = "permission"
    TRANSFER = "transfer"
    EXECUTE_DURATION = "execute duration"
    USER = "user"
    OTHER = "other"


# What happened, in words, and what to change, per kind. Placeholders: {rule}, {job_id}, {annex}.
_WHAT = {
    HoldKind.WAITING_FOR_ANNEX: "It waits for its annex {annex} to come up; the executor releases it then.",
    HoldKind.MEMORY: "It used more memory than it requested, and HTCondor stopped it.",
    HoldKind.DISK: "It wrote more to its scratch directory than it requested, and HTCondor stopped it.",
    HoldKind.OUTPUT_OBJECT_EXISTS: (
        "Its output would replace an OSDF object that already exists; OSDF objects are immutable "
        "(caches keep serving the first bytes written under a name), so nothing was written."),
    HoldKind.MISSING_OUTPUT: (
        "The job ended without writing that output, so its command most likely failed; HTCondor "
        "reports this as an output-transfer hold, with no exit code (its stdout, stderr and other "
        "outputs still come back)."),
    HoldKind.SUBMIT_DIR_NOT_WRITABLE: (
        "Its outputs could not be written back: the submit directory is not writable by the user the "
        "job runs as (the job's Owner). HTCondor then also writes no event log, so Snakemake sees no events."),
    HoldKind.TRANSFER: "Moving its files failed; the reason above names the file or URL.",
    HoldKind.EXECUTE_DURATION: "It ran longer than its runtime allows (allowed_execute_duration / JobDurationCategory).",
    HoldKind.USER: "Someone (you, or a policy) held it.",
    HoldKind.OTHER: "",
}
_FIX = {
    HoldKind.WAITING_FOR_ANNEX: (
        "Fix: see the annex analysis (`htcannex why {job_id}`); if the annex never comes up the executor "
        "moves the job to the next site of its rotation after the idle timeout (annex: idle_timeout)."),
    HoldKind.MEMORY: (
        "Fix: give rule {rule} more memory, growing with the attempt: resources: mem_mb=lambda wildcards, "
        f"attempt: 4000 * attempt. The executor removes the held job; with --retries the next attempt "
        f"asks for at least {MEMORY_RETRY_FACTOR}x the memory this one was held with, on the next site "
        "of the rotation."),
    HoldKind.DISK: (
        "Fix: give rule {rule} more disk, growing with the attempt: resources: disk_mb=lambda wildcards, "
        "attempt: 20000 * attempt"),
    HoldKind.OUTPUT_OBJECT_EXISTS: (
        "Fix: give every chunk's output a new name (put the run and chunk in the path, e.g. "
        ".../run{{run}}/ckpt-{{chunk}}.pt); to redo this chunk on purpose, delete or rename the object "
        "at the origin first, then run again. Releasing the job fails the same way."),
    HoldKind.MISSING_OUTPUT: "Fix: what the command said (its last lines follow, where it wrote any) is why.",
    HoldKind.SUBMIT_DIR_NOT_WRITABLE: (
        "Fix: run Snakemake in a directory the job's owner can write (chown it to that user, or submit as "
        "the owner of the directory); on a personal pool that maps root to another user, that user."),
    HoldKind.TRANSFER: (
        "Fix: check that the file exists and that the execute site can reach it (osdf:// objects: the "
        "object path, its .sha256 sidecar, your token). Transient failures are released automatically "
        "(--htcannex-hold-releases); with --retries the next attempt goes to the next site."),
    HoldKind.EXECUTE_DURATION: (
        "Fix: split the chunk: fewer epochs_per_job and more chunks, so each job ends well inside the "
        "limit (20 h for JobDurationCategory Medium, 40 h for Long), or raise resources: runtime."),
    HoldKind.USER: "Fix: `condor_release` it, or let Snakemake run it again.",
    HoldKind.OTHER: "Fix: read the reason above; `htcannex why {job_id}` has the match analysis.",
}


@dataclass(frozen=True)
class Hold:
    code: Optional[int]
    subcode: Optional[int]
    reason: str = ""

    @property
    def kind(self) -> HoldKind:
        code, subcode, reason = self.code, self.subcode, self.reason or ""
        if code == HoldCode.SubmittedOnHold:
            return HoldKind.WAITING_FOR_ANNEX
        if code == HoldCode.JobOutOfResources:
            return HoldKind.DISK if subcode == OutOfResources.Disk else HoldKind.MEMORY
        if code in POLICY_CODES:
            by_startd = code == HoldCode.StartdHeldJob
            if (by_startd and subcode == OutOfResources.Memory) or _MEMORY_WORDS.search(reason):
                return HoldKind.MEMORY
            if (by_startd and subcode == OutOfResources.Disk) or _DISK_WORDS.search(reason):
                return HoldKind.DISK
            return HoldKind.USER if code == HoldCode.JobPolicy else HoldKind.OTHER
        if code == HoldCode.TransferOutputError:
            if subcode == errno.EEXIST or "already exists" in reason:
                return HoldKind.OUTPUT_OBJECT_EXISTS
            if subcode == errno.EACCES:
                return HoldKind.SUBMIT_DIR_NOT_WRITABLE
            if subcode == errno.ENOENT:
                return HoldKind.MISSING_OUTPUT
            return HoldKind.TRANSFER
        if code == HoldCode.TransferInputError:
            return HoldKind.TRANSFER
        if code == HoldCode.JobExecuteExceeded:
            return HoldKind.EXECUTE_DURATION
        if code == HoldCode.UserRequest:
            return HoldKind.USER
        return HoldKind.OTHER

    @property
    def ours(self) -> bool:
        """Our own submit-on-hold while the job's annex comes up: not a failure."""
        return self.kind is HoldKind.WAITING_FOR_ANNEX

    @property
    def releasable(self) -> bool:
        """Whether a release may cure it: a transfer that can fail once and work the next time."""
        return self.kind is HoldKind.TRANSFER

    @property
    def needs_more_memory(self) -> bool:
        return self.kind is HoldKind.MEMORY

    def headline(self) -> str:
        return f"{self.reason} (HoldReasonCode {self.code}, HoldReasonSubCode {self.subcode})"

    def explanation(self, rule: str, job_id: str, annex: Optional[str] = None) -> list[str]:
        """What happened and what to change, as lines (the same words in the error and in `why`)."""
        values = {"rule": rule, "job_id": job_id, "annex": annex or "?"}
        return [text.format(**values) for text in (_WHAT[self.kind], _FIX[self.kind]) if text]


def memory_for_retry(held_with_mb: int) -> int:
    """The memory (MB) the next attempt asks for at least, after a memory hold with `held_with_mb`."""
    return MEMORY_RETRY_FACTOR * held_with_mb
