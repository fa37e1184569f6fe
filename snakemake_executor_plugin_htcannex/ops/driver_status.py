"""The walk-away driver as the board shows it: read from its own event log and Snakemake's
output in the working directory (paths.driver_dir), not from a schedd query.
"""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from snakemake_executor_plugin_htcannex.paths import DRIVER_EVENT_LOG, DRIVER_STDERR, driver_dir
from snakemake_executor_plugin_htcannex.secrets import redact
from snakemake_executor_plugin_htcannex.track.event_log import PHASE_WORDS, EventLogTracker, JobPhase


# How a workflow's final check names a failure in Snakemake's output (protein_lm's `check` rule
# prints one such line per failed check): the board shows them for a driver that failed, as
# Snakemake's own last lines only say that a job failed.
FAILED_CHECK = "FAILED CHECK:"


@dataclass
class DriverStatus:
    """The driver of one working directory, from its own event log (not a schedd query)."""

    job: str
    state: str  # idle running held done failed removed
    starts: int
    restarts: int  # starts after the first: access-point restarts and crashes
    log: str  # Snakemake's output (stderr), the file to `tail -f`
    last_lines: list = field(default_factory=list)
    failed_checks: list = field(default_factory=list)  # the FAILED_CHECK lines of a failed driver's log
    note: Optional[str] = None  # hold reason, exit code or why it ended


class DriverSource:
    """Reads the driver's event log incrementally, for a board that refreshes."""

    def __init__(self, workdir: Path, last_lines: int = 5):
        self.files = driver_dir(workdir)
        self.tracker = EventLogTracker(self.files / DRIVER_EVENT_LOG)
        self.last_lines = last_lines

    def close(self) -> None:
        self.tracker.close()

    def status(self) -> Optional[DriverStatus]:
        """The latest driver submitted in this directory, or None if there never was one."""
        self.tracker.poll()
        if not self.tracker.jobs:
            return None
        record = self.tracker.jobs[max(self.tracker.jobs, key=lambda job: tuple(map(int, job.split("."))))]
        note = record.hold_reason or record.end_reason
        if record.phase is JobPhase.FAILED and record.return_value is not None:
            note = f"Snakemake exited with {record.return_value}"
        stderr = self.files / DRIVER_STDERR
        lines = _tail(stderr)
        # Once each: a check rule retried (Snakemake's --retries) prints its lines again.
        failed = list(dict.fromkeys(line for line in lines if line.startswith(FAILED_CHECK))) if record.phase is JobPhase.FAILED else []
        return DriverStatus(job=record.job_id, state=PHASE_WORDS[record.phase], starts=record.starts,
                            restarts=max(record.starts - 1, 0), log=str(stderr),
                            last_lines=[redact(line) for line in lines[-self.last_lines:]],
                            failed_checks=[redact(line) for line in failed], note=redact(note) if note else None)


def _tail(path: Path) -> list[str]:
    """The non-empty lines of the file's last 16 KiB."""
    try:
        with open(path, "rb") as stream:
            stream.seek(0, 2)
            stream.seek(max(stream.tell() - 16384, 0))
            lines = stream.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return []
    return [line for line in lines if line.strip()]


def render(status: Optional[DriverStatus]) -> list[str]:
    """The board's driver section."""
    if status is None:
        return []
    restarts = f", {status.restarts} restart{'s' * (status.restarts != 1)}" if status.restarts else ""
    lines = [f"driver {status.job}: {status.state}{restarts}" + (f" ({status.note})" if status.note else ""),
             f"  log: {status.log}"]
    lines += [f"  {line}" for line in status.failed_checks]
    lines += [f"  | {line}" for line in status.last_lines]
    return lines + [""]
