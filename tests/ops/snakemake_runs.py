"""Running snakemake on the faults workflow (tests/ops/workflows/faults), reading its event log and
its status board."""
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import classad2
import htcondor2
from snakemake_executor_plugin_htcannex.track.event_log import NEVER_WAIT
from waiting import wait_until

FAULTS = Path(__file__).parent / "workflows" / "faults"  # the workflow these tests run
BIN = Path(sys.executable).parent
HTCANNEX = BIN / "htcannex"
CHAIN = ["--config", "sleep=10", "chain=1"]  # each chunk runs 10 s and reads the one before: time to act
# A Snakefile whose job asks for more than any slot has, live or in a catalogue; no rotation: any slot.
TOO_BIG = ('rule big:\n    output: "big.txt"\n    threads: 64\n'
           '    resources: mem_mb=10000000, gpu=1\n    shell: "touch {output}"\n')



@contextlib.contextmanager
def unwritable_by_the_job_owner(workdir: Path):
    """The submit directory and its .htcannex as the job's owner finds them when it cannot write there: HTCondor
    writes the event log and the outputs as that user (never root), so there is no event log."""
    (workdir / ".htcannex").mkdir(exist_ok=True)
    for directory in (workdir / ".htcannex", workdir):
        directory.chmod(0o555)
    try:
        yield
    finally:
        for directory in (workdir, workdir / ".htcannex"):
            directory.chmod(0o755)


def snakemake_argv(workdir: Path, *targets: str, extra=()) -> list[str]:
    return ["snakemake", "--executor", "htcannex", "--profile", str(workdir), *targets, *extra]


def run_snakemake(workdir: Path, env: dict, *targets: str, extra=(), timeout=180):
    return subprocess.run(snakemake_argv(workdir, *targets, extra=extra), cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=timeout)


def start_snakemake(workdir: Path, env: dict, *targets: str, extra=()) -> subprocess.Popen:
    """snakemake started as from a terminal: its output (stdout and stderr) read as it comes, and
    SIGINT a terminal's Ctrl-C, even where the tests were started with SIGINT ignored."""
    return subprocess.Popen(snakemake_argv(workdir, *targets, extra=extra), cwd=workdir, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def read_until(snakemake: subprocess.Popen, text: str) -> str:
    """What `snakemake` writes, up to the first line that holds `text`."""
    lines = []
    for line in snakemake.stdout:
        lines.append(line)
        if text in line:
            break
    return "".join(lines)


def running_job(pool, rule):
    ads = pool.schedd().query(f'HtcannexRule == "{rule}" && JobStatus == 2', ["ClusterId", "ProcId", "RemoteHost"])
    return ads[0] if ads else None


def kill_snakemake_once_running(workdir, env, pool, rule, target, options):
    """Start snakemake for `target`, kill -9 it once a job of `rule` runs, and unlock the directory."""
    first = subprocess.Popen(snakemake_argv(workdir, target, extra=options), cwd=workdir, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: running_job(pool, rule), timeout_s=60, what=f"a job of rule {rule} to start")
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # as when the login node reboots
        first.wait()
    unlocked = run_snakemake(workdir, env, target, extra=["--unlock"])
    assert unlocked.returncode == 0, unlocked.stderr[-2000:]


def events(workdir: Path) -> list:
    """Every event of the run's one event log, as (type, job id, event)."""
    log = htcondor2.JobEventLog(str(workdir / ".htcannex" / "jobs.log"))
    return [(event.type, f"{event.cluster}.{event.proc}", event) for event in log.events(stop_after=NEVER_WAIT)]


def annexes_by_job(workdir: Path) -> dict:
    """job id -> the annexes it executed on, in order (None: a slot of no annex)."""
    ran = {}
    for kind, job, event in events(workdir):
        if kind == htcondor2.JobEventType.EXECUTE:
            ran.setdefault(job, []).append(event["ExecuteProps"].get("AnnexName") if "ExecuteProps" in event else None)
    return ran


def status(workdir: Path, pool, *extra, **kwargs):
    """`htcannex status` on the run in `workdir`."""
    return subprocess.run([str(HTCANNEX), "status", "--directory", str(workdir), "--pool-dir", str(pool.spool_dir),
                           "--htcannex-config", str(workdir / "htcannex.yaml"), *extra],
                          capture_output=True, text=True, timeout=60, **kwargs)


def board(workdir: Path, pool) -> dict:
    """The status board as JSON, with 4 epochs per chunk."""
    result = status(workdir, pool, "--json", "--epochs-per-job", "4")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def running_chunk(schedd, workdir: Path | None = None):
    """A running job of the faults workflow's rule chunk (of `workdir`'s run, if given), or None."""
    constraint = 'HtcannexRule == "chunk" && JobStatus == 2'
    if workdir is not None:
        constraint += f" && Iwd == {classad2.quote(str(workdir))}"
    ads = schedd.query(constraint, ["ClusterId"])
    return ads[0] if ads else None


def driver_events(workdir: Path) -> list:
    """The event types of the driver's own event log (htcannex submit's job)."""
    log = htcondor2.JobEventLog(str(workdir / ".htcannex" / "driver" / "events.log"))
    return [event.type for event in log.events(stop_after=NEVER_WAIT)]


def snakemake_log(workdir: Path) -> str:
    """What the driver's Snakemake wrote (its stderr)."""
    return (workdir / ".htcannex" / "driver" / "snakemake.err").read_text()
