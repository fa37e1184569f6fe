"""The Snakemake driver as an HTCondor job: what `htcannex submit`, `stop` and `status` share.

A run of weeks cannot depend on a terminal. `htcannex submit` hands Snakemake
itself to the access point's schedd as a **local-universe** job, as HTCondor's
own `htcondor snake submit` does, and as DAGMan runs under the schedd: it runs
on the access point, in the working directory (no sandbox, no file transfer),
as the submitting user, survives the user's logout, and the schedd starts it
again after an access-point restart (a local-universe job cannot reconnect:
the schedd marks it idle on start-up and runs it anew).

Local universe, not the scheduler universe (DAGMan's): HTCondor's manual calls
local the better choice for jobs that must run on the submit host and says the
scheduler universe may be retired; a local-universe job has a condor_starter,
so the job policy (`on_exit_remove`), the kill signals and the
kill of the job's whole process tree on removal hold for it as for any job.

The restart policy, in HTCondor's terms:
- an access-point restart evicts the driver and the schedd runs it again. A
  schedd shutting down asks the local starter for a graceful shutdown, and
  the starter sends the job its `remove_kill_sig` when the job sets one, else
  its `kill_sig` (25.x src/condor_starter.V6.1/os_proc.cpp, ShutdownGraceful;
  schedd.cpp sends the local starter DC_SIGSOFTKILL). The driver sets
  `kill_sig = SIGKILL` and no `remove_kill_sig`: on a real 25.14.0 pool the
  driver with `remove_kill_sig = SIGINT` took a schedd shutdown for Ctrl-C and
  removed every job it had submitted; killed, it leaves them running (on their
  execute points, reconnected by the schedd) and the next start adopts them;
- a driver killed by a signal (a crash, the OOM killer, `kill -9`) exits by
  signal: `on_exit_remove = ExitBySignal =!= true` keeps it in the queue, so it
  runs again. A driver that exits by itself (0: the workflow is done; 1: it
  failed) leaves the queue. The driver counts its own starts and gives up (exit
  1) after `max_starts`: HTCondor's counts do not serve in the local universe
  (`max_retries` counts NumJobCompletions, which only a shadow updates; the
  local starter raises NumJobStarts in the queue but judges `on_exit_remove`
  on the ad it started with, one start behind);
- every restart resumes with the existing recovery (driver/entry.py): the stale
  Snakemake lock its previous run left is removed and Snakemake runs with
  `--rerun-incomplete`, so the executor adopts jobs still queued and jobs that
  completed meanwhile: nothing is submitted twice, nothing lost.

`htcannex stop` removes the driver: HTCondor sends it SIGTERM (`remove_kill_sig`'s
default), on which Snakemake submits nothing more and waits for its running
jobs; `stop` removes those jobs, so Snakemake exits (commands/stop.py).
"""
import json
import signal
from pathlib import Path
from typing import Optional

import classad2
import htcondor2
from htcondor_codes import JobStatus

from snakemake_executor_plugin_htcannex.submit.description import quote_new_syntax
from snakemake_executor_plugin_htcannex.paths import DRIVER_EVENT_LOG, DRIVER_RECORD, DRIVER_STDERR, DRIVER_STDOUT, driver_dir
from snakemake_executor_plugin_htcannex.secrets import is_secret_name, redact
from snakemake_executor_plugin_htcannex.submit_language import SubmitValueError, ValueChecker

# Job ad attribute naming the working directory a driver runs Snakemake in.
DRIVER_ATTRIBUTE = "HtcannexDriver"
DEFAULT_MAX_STARTS = 10
# Seconds between the remove signal (SIGTERM: Snakemake waits for its jobs, which `stop` removes) and SIGKILL.
CANCEL_GRACE_S = 60
NOTIFICATIONS = ("never", "error", "complete", "always")
# The driver's request_memory. The local universe enforces none, but an access point's
# SYSTEM_PERIODIC_HOLD on MemoryUsage > RequestMemory judges it too: a tiny workflow's
# Snakemake used 143 MB against the default 128 and was held (26/0) on a real 25.14.0 pool.
DEFAULT_MEMORY = "1GB"
QUEUED = f"JobStatus =!= {int(JobStatus.REMOVED)} && JobStatus =!= {int(JobStatus.COMPLETED)}"


class DriverError(Exception):
    """What `htcannex submit` or `stop` cannot do; the message says why and what to do."""


def driver_constraint(workdir: Path) -> str:
    return f"{DRIVER_ATTRIBUTE} == {classad2.quote(str(Path(workdir).resolve()))}"


def run_jobs_constraint(workdir: Path) -> str:
    """The queued jobs the executor submitted for the run in `workdir` (their Iwd is the workdir)."""
    return f"HtcannexRule isnt undefined && Iwd == {classad2.quote(str(Path(workdir).resolve()))} && {QUEUED}"


def drivers_in_queue(schedd, workdir: Path) -> list:
    """The driver jobs of `workdir` in the queue: idle, running, held, or removed and still ending."""
    return schedd.query(driver_constraint(workdir), ["ClusterId", "ProcId", "JobStatus"])


def record_path(workdir: Path) -> Path:
    return driver_dir(workdir) / DRIVER_RECORD


def write_record(workdir: Path, *, job: str, target: str, pool_dir: Optional[Path]) -> None:
    record = {"job": job, "schedd": target, "pool_dir": str(pool_dir) if pool_dir else None}
    record_path(workdir).write_text(json.dumps(record) + "\n")


def read_record(workdir: Path) -> Optional[dict]:
    path = record_path(workdir)
    return json.loads(path.read_text()) if path.is_file() else None


def _submit_text(field: str, value: str) -> str:
    """A value as submit-language text (submit_language.ValueChecker), or a DriverError saying why not."""
    try:
        return ValueChecker("driver").text(field, value)
    except SubmitValueError as error:
        raise DriverError(redact(f"{field} {value!r}: {error.why}")) from error


def environment_matchlist(environment: dict) -> tuple[str, list[str]]:
    """(`getenv` matchlist: everything but the secret variables present, their names).

    The driver needs the user's environment (PATH to this Python, HTCondor's and
    Snakemake's settings), but a job's environment is stored in its job ad, readable by
    others: variables whose names hold a secret stay out (secrets.py decides).
    """
    withheld = sorted(name for name in environment if is_secret_name(name))
    return ", ".join(["*", *(f"!{name}" for name in withheld)]), withheld


def submit_description(*, python: str, iwd: Path, workdir: Path, snakemake_args: list[str],
                       environment: dict, notification: str = "never", notify_user: Optional[str] = None,
                       max_starts: int = DEFAULT_MAX_STARTS,
                       request_memory: str = DEFAULT_MEMORY) -> tuple[htcondor2.Submit, list[str]]:
    """(the driver's submit description, the environment variables withheld from it)."""
    files = driver_dir(workdir)
    getenv, withheld = environment_matchlist(environment)
    arguments = ["-m", "snakemake_executor_plugin_htcannex.driver.entry", "--job", "$(ClusterId).$(ProcId)",
                 "--workdir", _submit_text("working directory", str(workdir)), "--max-starts", str(int(max_starts)),
                 "--", *(_submit_text("argument", argument) for argument in snakemake_args)]
    commands = {
        "universe": "local",
        "executable": python,
        "arguments": quote_new_syntax(arguments),
        "initialdir": _submit_text("directory", str(iwd)),
        "log": _submit_text("working directory", str(files / DRIVER_EVENT_LOG)),
        "output": _submit_text("working directory", str(files / DRIVER_STDOUT)),
        "error": _submit_text("working directory", str(files / DRIVER_STDERR)),
        "getenv": getenv,
        "request_memory": _submit_text("--request-memory", request_memory),
        "on_exit_remove": "ExitBySignal =!= true",
        "kill_sig": signal.Signals.SIGKILL.name,
        "job_max_vacate_time": str(CANCEL_GRACE_S),
        "notification": notification,
        "batch_name": _submit_text("working directory", f"htcannex-driver-{workdir.name}"),
        f"MY.{DRIVER_ATTRIBUTE}": classad2.quote(_submit_text("working directory", str(workdir))),
    }
    if notify_user:
        commands["notify_user"] = _submit_text("--notify-user", notify_user)
    return htcondor2.Submit(commands), withheld
