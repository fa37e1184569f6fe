"""What `make demo` runs: the documented command on the embedded pool, then where each job ran.

    snakemake --executor htcannex --profile profiles/local -s SNAKEFILE

SNAKEFILE is workflows/protein_lm/Snakefile once that workflow exists, else the
small chunk chain of tests/workflows/chunks. The table after the run comes from
the one event log (the annex of each execute event) and the pool's history (which
Snakemake job each HTCondor job was).
"""
import os
import re
import subprocess
import sys
from pathlib import Path

from .executor import STATE_DIR
from .pool import Pool
from .tracking import EventLogTracker

REPO = Path(__file__).resolve().parent.parent
WORKFLOWS = (REPO / "workflows" / "protein_lm" / "Snakefile", REPO / "tests" / "workflows" / "chunks" / "Snakefile")
# How Snakemake names the job a spawned Snakemake runs: --target-jobs 'rule:name=value,...'
# (the job ad's Arguments use HTCondor's new syntax, which doubles single quotes).
TARGET_JOBS = re.compile(r"--target-jobs '+([^']+)'")


def main() -> int:
    snakefile = next(path for path in WORKFLOWS if path.exists())
    command = [
        str(Path(sys.executable).parent / "snakemake"), "--executor", "htcannex",
        "--profile", "profiles/local", "-s", str(snakefile.relative_to(REPO)),
    ]
    print("$ snakemake", *command[1:], flush=True)
    status = subprocess.run(command, cwd=REPO).returncode
    print_where_jobs_ran(REPO)
    return status


def print_where_jobs_ran(workdir: Path) -> None:
    tracker = EventLogTracker(workdir / STATE_DIR / "jobs.log")
    tracker.poll()
    pool = Pool(os.environ.get("HTCANNEX_POOL_DIR") or workdir / STATE_DIR / "pool")
    targets = {
        f"{ad['ClusterId']}.{ad['ProcId']}": match.group(1)
        for ad in pool.schedd().history("true", ["ClusterId", "ProcId", "Arguments"])
        if (match := TARGET_JOBS.search(str(ad.get("Arguments", ""))))
    }
    print("\nwhere each job ran (from .htcannex/jobs.log):")
    for job_id, record in sorted(tracker.jobs.items(), key=lambda item: [int(n) for n in item[0].split(".")]):
        where = record.annex or ("the ordinary slot" if record.ever_started else "-")
        print(f"  HTCondor job {job_id:>6}  {record.phase.value:<9}  {where:<20}  {targets.get(job_id, '?')}")


if __name__ == "__main__":
    sys.exit(main())
