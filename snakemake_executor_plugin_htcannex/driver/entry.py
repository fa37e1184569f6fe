"""What the driver job runs: Snakemake, resumed when HTCondor starts the driver again.

    python -m snakemake_executor_plugin_htcannex.driver.entry --job C.P --workdir DIR --max-starts N -- SNAKEMAKE ARGS

The first start runs `snakemake ARGS`. A later start of the same job is a
restart (an access-point restart, a crash: see control.py), and resumes the way
docs/operations.md tells a user to after a `kill -9`:
- the Snakemake lock the killed run left is stale: HTCondor runs one instance of
  a job at a time, and `htcannex submit` refused a directory that was locked.
  It is removed with Snakemake's own `--unlock`, unless another Snakemake runs
  in the directory now (someone started one while the driver was down): then the
  lock is left and Snakemake says that the directory is locked;
- Snakemake runs with `--rerun-incomplete`: the outputs of the jobs the killed
  run had submitted are marked incomplete, and the executor adopts each such job
  that is still queued or completed meanwhile instead of submitting it again.

The process then becomes Snakemake (exec), so the signals HTCondor sends the job
(SIGTERM on removal, SIGKILL on a schedd shutdown or a vacate: control.py) reach Snakemake.
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from snakemake_executor_plugin_htcannex.paths import driver_dir

SNAKEMAKE = [sys.executable, "-m", "snakemake"]
LOCKS = Path(".snakemake") / "locks"


def _starts_file(workdir: Path, job: str) -> Path:
    return driver_dir(workdir) / f"{job}.starts"


def _record_start(workdir: Path, job: str) -> int:
    """Count this start of `job` (one line per start); returns how many there have been."""
    path = _starts_file(workdir, job)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as starts:
        starts.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}\n")
    return len(path.read_text().splitlines())


def other_snakemake(workdir: Path) -> psutil.Process | None:
    """A Snakemake driving a workflow in `workdir` now, other than this process.

    Snakemake changes into its working directory; the Snakemakes that jobs run
    (`--mode remote`, in a job's directory) do not lock the workdir and are not counted.
    """
    for process in psutil.process_iter(["pid", "cmdline", "cwd"]):
        info = process.info
        cmdline = info.get("cmdline") or []
        if info["pid"] == os.getpid() or info.get("cwd") != str(workdir):
            continue
        runs_snakemake = any(Path(part).name == "snakemake" for part in cmdline[:3])
        runs_a_job = "--mode" in cmdline and cmdline[cmdline.index("--mode") + 1:][:1] == ["remote"]
        if runs_snakemake and not runs_a_job:
            return process
    return None


def _resume_arguments(workdir: Path, snakemake_args: list[str], start: int) -> list[str]:
    print(f"htcannex driver: start {start}: resuming (Snakemake's --rerun-incomplete; the executor adopts "
          "jobs still queued and jobs that completed while the driver was down)", file=sys.stderr, flush=True)
    if (workdir / LOCKS).is_dir():
        holder = other_snakemake(workdir)
        if holder is None:
            print("htcannex driver: removing the stale lock the previous run left (snakemake --unlock)",
                  file=sys.stderr, flush=True)
            subprocess.run([*SNAKEMAKE, *snakemake_args, "--unlock"], check=False)
        else:
            print(f"htcannex driver: Snakemake pid {holder.pid} runs in {workdir}: leaving its lock",
                  file=sys.stderr, flush=True)
    return [*snakemake_args, "--rerun-incomplete"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="driver_job", description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, help="the driver's HTCondor job id")
    parser.add_argument("--workdir", required=True, type=Path, help="Snakemake's working directory")
    parser.add_argument("--max-starts", type=int, required=True, help="give up (exit 1) on a later start")
    parser.add_argument("snakemake_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    snakemake_args = args.snakemake_args[1:] if args.snakemake_args[:1] == ["--"] else args.snakemake_args
    workdir = args.workdir.resolve()
    start = _record_start(workdir, args.job)
    if start > args.max_starts:
        print(f"htcannex driver: job {args.job} was started {start} times (--max-starts {args.max_starts}), "
              "each time killed by a signal: giving up. Snakemake's log of each start is in "
              f"{workdir / '.snakemake' / 'log'}. To resume: snakemake --unlock ARGS, then "
              "htcannex submit ARGS --rerun-incomplete", file=sys.stderr)
        return 1
    if start > 1:
        snakemake_args = _resume_arguments(workdir, snakemake_args, start)
    os.execv(sys.executable, [*SNAKEMAKE, *snakemake_args])


if __name__ == "__main__":
    sys.exit(main())
