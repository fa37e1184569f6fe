"""File transfer between the submit side (Iwd), a job's sandbox and the OSDF origin.

As HTCondor's file transfer: only `transfer_input_files` (plus the executable
and saved checkpoint files) go into the sandbox; a directory listed with a
trailing slash sends its contents; outputs come back to Iwd by base name, or
to `output_destination`, or where `transfer_output_remaps` says. `osdf:///p`
names `<origin>/p` (the pool's stand-in for an OSDF origin and its caches).

Modification times, as HTCondor's file transfer leaves them (src/condor_utils/file_transfer.cpp,
DoDownload): a file is written afresh where it arrives, and the starter receiving a job's inputs
(and checkpoint files) then sets every file's mtime to the current time in whole seconds
(`utime(..., time(NULL))`, the `want_fsync` case): inputs dated years apart arrive with the same
second. Outputs coming back to the access point are written afresh and keep the time they were
written (no utime there): neither side's original mtime survives a transfer.
"""
import errno
import os
import shutil
import stat
import time
from pathlib import Path

import classad2
from htcondor_codes import HoldCode

from . import remaps
from .jobads import file_list
from .permissions import writable_by

OSDF_PREFIX = "osdf://"
# The URL methods this transfer serves (origin_path), which the pool's slots advertise as their starters'
# HasFileTransferPluginMethods unless a slot or annex is given others.
PLUGIN_METHODS = "osdf"
STDOUT, STDERR = "_condor_stdout", "_condor_stderr"
JOB_AD, MACHINE_AD = ".job.ad", ".machine.ad"
# Files the starter itself puts in the sandbox: never outputs or checkpoint files.
STARTER_FILES = {STDOUT, STDERR, JOB_AD, MACHINE_AD}


class TransferError(Exception):
    """A failed transfer; carries the hold code HTCondor would use."""

    def __init__(self, code: int, subcode: int, message: str):
        super().__init__(message)
        self.code, self.subcode = code, subcode


def origin_path(origin: Path, url: str) -> Path:
    """`osdf:///a/b` (or `osdf://a/b`) -> origin/a/b, refusing paths that leave the origin."""
    relative = url[len(OSDF_PREFIX):].lstrip("/")
    path = (origin / relative).resolve()
    if origin.resolve() not in (path, *path.parents):
        raise ValueError(f"{url} points outside the OSDF origin")
    return path


def _copy(source: Path, destination: Path) -> int:
    """Write a file or a directory tree afresh at `destination`: contents and permissions, never the
    source's times. Returns the bytes copied (the job's BytesRecvd/BytesSent)."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, destination, dirs_exist_ok=True, copy_function=shutil.copy)
        return sum(os.stat(path).st_size for path in _files_below(source))
    shutil.copy(source, destination)
    return source.stat().st_size


def _files_below(directory: Path):
    """The files below `directory` (symbolic links to files too; links to directories not entered),
    as rglob found them, from os.walk's directory entries (54 us against rglob's 127 for a small tree)."""
    for parent, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(parent, name)
            if os.path.isfile(path):
                yield path


def _stamp_received(sandbox: Path, received_at: int):
    """Every file the starter received gets the receiving second as its mtime (see the module doc)."""
    for path in _files_below(sandbox):
        os.utime(path, (received_at, received_at))


def _failure(job, direction: str, name: str, why: str, error_number: int = errno.ENOENT) -> TransferError:
    """A transfer failure worded as HTCondor's shadow words it; direction: input | output.
    The hold's subcode is the errno (HTCondor's own failures mostly ENOENT, 2)."""
    code, action = ((HoldCode.TransferInputError, "receiving files from") if direction == "input"
                    else (HoldCode.TransferOutputError, "sending files to"))
    return TransferError(
        code, error_number, f"Transfer {direction} files failure at execution point while {action} the access point. "
                 f"Details: reading from file {name}: {why} (job {job['ClusterId']}.{job['ProcId']})")


def _keeps_relative_path(job, name: str) -> bool:
    """`preserve_relative_paths = true` keeps a relative path's directories both ways."""
    return (bool(job.get("PreserveRelativePaths", False)) and "://" not in name
            and not Path(name).is_absolute())


def _sandbox_name(job, name: str) -> str:
    return str(Path(name)) if _keeps_relative_path(job, name) else Path(name.rstrip("/")).name


def stage_in(job: classad2.ClassAd, sandbox: Path, origin: Path, checkpoint_dir: Path | None) -> int:
    """Fill a fresh sandbox with what the job declared, plus its last checkpoint; returns the bytes."""
    iwd = Path(job["Iwd"])
    sandbox.mkdir(parents=True)
    received = 0
    for name in file_list(job.get("TransferInput", "")):
        try:
            source = origin_path(origin, name) if name.startswith(OSDF_PREFIX) else iwd / name
        except ValueError as error:
            raise _failure(job, "input", name, str(error)) from None
        if not source.exists():
            raise _failure(job, "input", name, "(errno 2) No such file or directory")
        if source.is_symlink() and source.is_dir() and not name.endswith("/"):
            # HTCondor's DoUpload: "attempting to transfer symlink ... which points to a directory. This is
            # not supported."
            raise _failure(job, "input", name, "a symbolic link to a directory is not transferred")
        if source.is_dir() and name.endswith("/") and not _keeps_relative_path(job, name):
            # Its contents, where the directory would go; with preserve_relative_paths a relative
            # path's trailing slash is ignored (htcondor-jdl.rst; seen on a real 25.14.0 pool).
            received += _copy(source, sandbox)
        else:
            received += _copy(source, sandbox / _sandbox_name(job, name))
    if job.get("TransferExecutable", True):
        executable = Path(job["Cmd"])
        if not executable.is_file():
            raise _failure(job, "input", str(executable), "(errno 2) No such file or directory")
        received += _copy(executable, sandbox / executable.name)
        os.chmod(sandbox / executable.name, 0o755)
    if checkpoint_dir is not None and checkpoint_dir.is_dir():
        received += _copy(checkpoint_dir, sandbox)
    _stamp_received(sandbox, int(time.time()))
    return received


def snapshot(sandbox: Path) -> dict[str, tuple[float, int]]:
    """Top-level files and their (mtime, size): what "new or changed" is judged against."""
    return {entry.name: (entry.stat().st_mtime, entry.stat().st_size)
            for entry in sandbox.iterdir() if entry.is_file()}


def _destination(job, origin: Path, name: str) -> Path:
    """Where output `name` goes: where `transfer_output_remaps` sends it (remaps.py), or by its name. A
    remapped file's directory is made if missing (ALLOW_TRANSFER_REMAP_TO_MKDIR, true by default)."""
    iwd = Path(job["Iwd"])
    try:
        remapped = remaps.remap(job.get("TransferOutputRemaps", ""), name)
    except remaps.RemapCycle as error:
        raise ValueError(str(error)) from None
    if remapped is not None:
        return origin_path(origin, remapped) if remapped.startswith(OSDF_PREFIX) else iwd / remapped
    base = _sandbox_name(job, name)
    destination = job.get("OutputDestination")
    if destination:
        return (origin_path(origin, destination) if destination.startswith(OSDF_PREFIX)
                else iwd / destination) / base
    return iwd / base


def _sent_items(job, sandbox: Path, name: str) -> list[str]:
    """The names HTCondor sends for listed output `name`: a directory listed without a trailing slash, with
    preserve_relative_paths, is sent as itself and then each entry below it, by its path in the sandbox
    (ExpandFileTransferList), each remapped on its own; anything else as one item."""
    source = sandbox / name
    if not (source.is_dir() and not name.endswith("/") and _keeps_relative_path(job, name)):
        return [name]
    items = [name]
    for parent, directories, files in os.walk(source):
        relative = Path(parent).relative_to(sandbox)
        items += [str(relative / entry) for entry in sorted(directories) + sorted(files)]
    return items


def output_names(job, sandbox: Path, before: dict) -> list[str]:
    """Declared outputs, or (none declared) the new or changed top-level files."""
    declared = job.get("TransferOutput")
    if declared is not None:
        return file_list(declared)
    skip = STARTER_FILES | {Path(job["Cmd"]).name if job.get("TransferExecutable", True) else None}
    return sorted(name for name, stamp in snapshot(sandbox).items()
                  if name not in skip and before.get(name) != stamp)


def stage_out(job: classad2.ClassAd, sandbox: Path, origin: Path, before: dict, succeeded: bool) -> int:
    """Send the job's outputs back (returns the bytes); a declared output that is missing fails
    the transfer. With `when_to_transfer_output = ON_SUCCESS` a failed job sends back only stdout/stderr.
    As HTCondor's FileTransfer::DoUpload, a file that cannot be read or stored fails the transfer
    only after the rest went back, stdout and stderr among them (the first failure is the one
    reported). A missing file does not arrive: put_file sends an empty one in its place, which
    ReliSock::get_file removes on the receiving side as a failed transfer (a real 25.13.2 leaves
    none). `origin` is resolved (the daemon resolves it once). The sandbox is spent afterwards: its files may have been moved out (_deliver)."""
    send_files = succeeded or job.get("WhenToTransferOutput") != "ON_SUCCESS"
    sent, failures = 0, []
    # An output listed twice arrives once: its second transfer would write the same bytes again.
    for name in dict.fromkeys(output_names(job, sandbox, before)) if send_files else []:
        source = sandbox / name
        if not source.exists():
            failures.append(_failure(job, "output", str(source), "(errno 2) No such file or directory"))
            continue
        for item in _sent_items(job, sandbox, name):
            sent += _send_item(job, sandbox / item, item, origin, failures)
    iwd = Path(job["Iwd"])
    for captured, attribute in ((STDOUT, "Out"), (STDERR, "Err")):
        if job[attribute] != "/dev/null" and (sandbox / captured).exists():
            sent += _send(job, sandbox / captured, iwd / job[attribute], origin)
    if failures:
        raise failures[0]
    return sent


def _item_destination(job, source: Path, name: str, origin: Path) -> Path:
    try:
        return _destination(job, origin, name)
    except ValueError as error:
        raise _failure(job, "output", str(source), str(error)) from None


def _send_item(job, source: Path, name: str, origin: Path, failures: list) -> int:
    """One item HTCondor sends back: a directory is made where it is remapped to (its contents are items of
    their own), a file is sent. An OSDF object that exists already is a failure, added to `failures`."""
    destination = _item_destination(job, source, name, origin)
    if destination.exists() and destination.is_relative_to(origin):
        existing = destination.relative_to(origin)
        failures.append(_failure(job, "output", str(source), f"(errno 17) the OSDF object {existing} already "
                                 "exists, and OSDF objects are immutable: write a new name", error_number=errno.EEXIST))
        return 0
    if source.is_dir() and _keeps_relative_path(job, name) and not name.endswith("/"):
        if not writable_by(job["Owner"], destination.parent):
            raise _failure(job, "output", str(source), f"creating {destination}: (errno {errno.EACCES}) "
                           "Permission denied", error_number=errno.EACCES)
        destination.mkdir(parents=True, exist_ok=True)
        return 0
    return _send(job, source, destination, origin)


def _send(job, source: Path, destination: Path, origin: Path) -> int:
    """One output to its destination, written as the job's owner: a submit directory the owner
    cannot write fails the transfer with EACCES, which HTCondor holds as 12/13. `origin` is resolved."""
    if not destination.is_relative_to(origin) and not writable_by(job["Owner"], destination.parent):
        raise _failure(job, "output", str(source), f"writing to {destination}: (errno {errno.EACCES}) "
                       "Permission denied", error_number=errno.EACCES)
    try:
        return _deliver(source, destination)
    except OSError as error:
        raise _failure(job, "output", str(source), str(error)) from None


def _deliver(source: Path, destination: Path) -> int:
    """An output from the spent sandbox to its destination, as HTCondor's transfer leaves it there:
    a new file with the job's bytes and mode, modified now. A regular file on the destination's
    filesystem is moved there and its mtime set to now (the same file as a copy, for two system
    calls where a copy creates, writes and closes one and the sandbox's removal unlinks another:
    ~0.15 ms of the daemon's CPU per file here); anything else is copied (_copy)."""
    status = source.lstat()
    if stat.S_ISREG(status.st_mode):
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(source, destination)
        except OSError:  # another filesystem (EXDEV), a directory in the way, ...: a copy says why not
            return _copy(source, destination)
        os.utime(destination)
        return status.st_size
    return _copy(source, destination)


def save_checkpoint(job: classad2.ClassAd, sandbox: Path, checkpoint_dir: Path):
    """Keep the files a self-checkpointing job names (all top-level files if it names none)."""
    names = file_list(job.get("TransferCheckpoint", job.get("TransferOutput", "")))
    if not names:
        names = [entry.name for entry in sandbox.iterdir() if entry.name not in STARTER_FILES]
    staging = checkpoint_dir.with_name(checkpoint_dir.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in names:
        if (sandbox / name).exists():
            _copy(sandbox / name, staging / name)
    # Swap whole directories so a crash never leaves a half-written checkpoint.
    shutil.rmtree(checkpoint_dir, ignore_errors=True)
    staging.rename(checkpoint_dir)
