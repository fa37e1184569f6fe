"""What a failed job's message adds after its stderr: the likely cause and its fix, where the failure
says enough to name one. Each hint is "" when it does not apply."""
import os
import re
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Optional

from snakemake_executor_plugin_htcannex import secrets
from snakemake_executor_plugin_htcannex.paths import EXECUTE_POINT_PATH
from snakemake_executor_plugin_htcannex.track.event_log import JobRecord

STDERR_TAIL_LINES = 20
COMMAND_NOT_FOUND = 127  # a POSIX shell's exit status for a command it cannot find
KILLED = int(signal.SIGKILL)
KILLED_CHILD = 128 + KILLED  # a shell's exit status for a command killed by SIGKILL
MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
MISSING_FILE = re.compile(r"No such file or directory: '([^'/][^']*)'")  # Python's FileNotFoundError, relative
# What a job's own Snakemake says of a command killed by SIGKILL (subprocess.CalledProcessError's words, for a
# shell's 137 and for the killed process itself); the job then exits 1.
SNAKEMAKE_SAW_A_KILL = re.compile(rf"returned non-zero exit status {KILLED_CHILD}\.|died with <Signals\.SIGKILL: {KILLED}>\.")


def hints(record: JobRecord, stderr_tail: str) -> str:
    return (_execute_side_hint(record.return_value, stderr_tail) + _untravelled_file_hint(stderr_tail)
            + _killed_hint(record, stderr_tail))


def stderr_tail(path: Optional[str], lines: int = STDERR_TAIL_LINES) -> str:
    if not path:
        return ""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def command_output(stderr: Optional[str], logs: Iterable[str]) -> tuple[str, str]:
    """(the file, its last lines) of what a failed job's command said: its stderr; else the rule's
    logs (a rule's shell that writes `> {log} 2>&1` sends its stderr there); else its stdout (the
    stderr file's .out sibling, description.py names both). ("", "") when all are empty or absent.
    HTCondor brings these back also when it holds the job for an output the command left missing."""
    stdout = str(Path(stderr).with_suffix(".out")) if stderr else None
    for path in (stderr, *logs, stdout):
        tail = stderr_tail(path)
        if tail.strip():
            return path, tail
    return "", ""


def command_output_text(stderr: Optional[str], logs: Iterable[str]) -> str:
    """The failure message's part that shows the command's output (command_output), its secrets redacted."""
    path, tail = command_output(stderr, logs)
    return f"Last lines of {path}:\n{secrets.redact(tail)}\n" if tail else ""


def _untravelled_file_hint(stderr_tail: str) -> str:
    """The fix when the job could not open a file that is here: it did not travel with the job. Files
    a run: block names by a string constant travel (unlisted_sources.py); one it reads under a name it
    computes is not found until it is declared."""
    here = [name for name in dict.fromkeys(MISSING_FILE.findall(stderr_tail)) if os.path.isfile(name)]
    if not here:
        return ""
    return (f"The job could not open {', '.join(here)}, which is in the working directory here but did not "
            "travel with the job: HTCondor moves only a job's inputs and the workflow's sources. Fix: declare "
            "it as an input of the rule (input: ...). ")


def _execute_side_hint(return_value: Optional[int], stderr_tail: str) -> str:
    """What the execute side lacks, when the failure says so: a command not on its PATH (exit 127),
    or a Python without the workflow's modules. Jobs run there as the submitting user, with
    the PATH the job sets (no login environment) and whatever Python the site or image has."""
    missing = MISSING_MODULE.search(stderr_tail)
    if return_value != COMMAND_NOT_FOUND and not missing:
        return ""
    lacks = (f"its Python has no module {missing.group(1)!r}" if missing
             else "a command the job runs is not on its PATH")
    return (f"The execute side lacks the workflow's software: {lacks}. A job runs `python -m snakemake` "
            f"(or the rule's command) with PATH={EXECUTE_POINT_PATH} and the Python found there. Fix: "
            "give the jobs a container image with the workflow's software (--htcannex-container-image), "
            "or have the site provide a `python` with it on that PATH (docs/real-access-point.md). ")


def killed_by_sigkill(return_value: Optional[int], signal_number: Optional[int]) -> bool:
    """Whether a terminated event says SIGKILL: the job's own process (TerminatedBySignal 9), or a command
    its shell ran (ReturnValue 137)."""
    return return_value == KILLED_CHILD or signal_number == KILLED


def killed(record: JobRecord, stderr_tail: str) -> bool:
    """Whether the job (or a command in it: its shell's 137, or its Snakemake's words in `stderr_tail`) was
    killed by SIGKILL, and HTCondor did not hold it. Where the execute point has no per-job cgroup (annexes
    and glideins run unprivileged: a starter that cannot switch ids makes none,
    src/condor_starter.V6.1/vanilla_proc.cpp), no memory limit holds the job (hold 34), and what kills it
    is the kernel's or the batch system's out-of-memory killer."""
    return (killed_by_sigkill(record.return_value, record.signal)
            or SNAKEMAKE_SAW_A_KILL.search(stderr_tail) is not None)


def _killed_hint(record: JobRecord, stderr_tail: str) -> str:
    """The likely cause of a kill (killed()) and its fix. The job's memory there is what the procd's
    snapshots saw (htcannex_pool/policy.py), so the peak may have been higher than the last one."""
    if not killed(record, stderr_tail):
        return ""
    if record.signal == KILLED:
        how = "was killed by SIGKILL"
    elif record.return_value == KILLED_CHILD:
        how = f"exited {KILLED_CHILD} (128 + SIGKILL: a command in it was killed)"
    else:
        how = "had a command killed by SIGKILL (its Snakemake says so above)"
    measured = (f" HTCondor last measured {record.memory_usage_mb} MB of the {record.memory_requested_mb} MB "
                "requested; without a per-job cgroup it measures in snapshots, so the peak may have been higher."
                if record.memory_usage_mb is not None and record.memory_requested_mb is not None else "")
    return (f"The job {how} and HTCondor did not hold it: where the execute point has no per-job cgroup (annexes "
            "and glideins), this is most often the kernel's or the batch system's out-of-memory killer."
            f"{measured} Fix: if the job needs more memory, raise the rule's mem_mb (request_memory). ")
