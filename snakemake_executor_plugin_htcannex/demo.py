"""What `make demo` runs: the documented command on the embedded pool, then what came of it.

    snakemake --executor htcannex --profile profiles/local -s workflows/protein_lm/Snakefile

Snakemake's own output is the progress. Afterwards: the status board (`htcannex status
--once`: where each chunk ran, per-site epoch times), the comparison table the workflow
wrote, an HTML report (`snakemake --report`) and the paths of the figures. When the workflow's
final check failed (a resume bug, or the equivalence study beyond its margin), the demo ends
with the failed checks, each naming its run or seed group, and exits non-zero.

`PROTEIN_LM_INJECT_RESUME_BUG=<bug> make demo` runs the demo as a negative control: the workflow
with `--config inject_resume_bug=<bug>` (docs/protein_lm.md, "The study").

The profile hands checkpoints through the embedded pool's OSDF origin (docs/protein_lm.md).
"""
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from htcannex_pool import DEFAULT_SPOOL, Pool
from snakemake_executor_plugin_htcannex.ops.driver_status import FAILED_CHECK

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / "workflows" / "protein_lm"
PROFILE = REPO / "profiles" / "local"
COMPARE = REPO / "results" / "compare"
REPORT = REPO / "results" / "report.html"
CHECK_LOG = REPO / "results" / "logs" / "check.log"  # the workflow's check rule
BIN = Path(sys.executable).parent
INJECT = "PROTEIN_LM_INJECT_RESUME_BUG"


def main() -> int:
    origin = Pool(os.environ.get("HTCANNEX_POOL_DIR") or REPO / DEFAULT_SPOOL).origin_dir
    if stale := stale_checkpoints(origin):
        print(f"make demo: {stale} holds the data and checkpoints of an earlier demo, but results/ is gone, so Snakemake "
              "would remake the data, retrain every chunk, and the origin would refuse to overwrite its immutable objects. "
              f"Delete them (rm -r {stale}) or restore results/.", file=sys.stderr)
        return 2
    snakemake = [str(BIN / "snakemake"), "--executor", "htcannex", "--profile", str(PROFILE.relative_to(REPO)),
                 "-s", str((WORKFLOW / "Snakefile").relative_to(REPO))]
    if bug := os.environ.get(INJECT):
        snakemake += ["--config", f"inject_resume_bug={bug}"]
    print("$ snakemake", *snakemake[1:], flush=True)
    started = time.time()
    status = subprocess.run(snakemake, cwd=REPO).returncode
    print_board()
    if status != 0:
        print_failed_checks(started)
        return status
    print_comparison()
    return make_report(snakemake)


def stale_checkpoints(origin: Path) -> Path | None:
    """The workflow's objects in the origin when results/data (make_data's metadata; its scores
    are objects there too) is gone: make_data and every chunk would run again under the same names."""
    prefix = yaml.safe_load((WORKFLOW / "config" / "config.yaml").read_text())["osdf_prefix"]
    objects = origin / prefix.removeprefix("osdf:///").strip("/") / "protein_lm"  # chunked_training: <prefix>/<name>
    data = REPO / "results" / "data"
    return objects if objects.is_dir() and any(objects.iterdir()) and not data.is_dir() else None


def print_board() -> None:
    epochs_per_job = yaml.safe_load((WORKFLOW / "config" / "config.yaml").read_text())["pretrain"]["epochs_per_job"]
    command = [str(BIN / "htcannex"), "status", "--once", "--profile", str(PROFILE), "--directory", str(REPO),
               "--epochs-per-job", str(epochs_per_job)]
    print("\n$ htcannex status --once --profile profiles/local", flush=True)
    subprocess.run(command, cwd=REPO)


def print_failed_checks(started: float) -> None:
    """The failed checks of this run's check rule, if it was what failed."""
    if not CHECK_LOG.exists() or CHECK_LOG.stat().st_mtime < started:
        return
    failed = [line for line in CHECK_LOG.read_text().splitlines() if line.startswith(FAILED_CHECK)]
    if failed:
        print(f"\nmake demo: the workflow's checks failed ({CHECK_LOG.relative_to(REPO)}; tables in "
              f"{COMPARE.relative_to(REPO)}):", *(f"  {line}" for line in failed), sep="\n", file=sys.stderr)


def print_comparison() -> None:
    for table in sorted(COMPARE.glob("*.tsv")):
        print(f"\n{table.relative_to(REPO)}:")
        rows = [line.split("\t") for line in table.read_text().splitlines()]
        widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
        for row in rows:
            print("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)))


def make_report(snakemake: list[str]) -> int:
    """The report only reads what the run recorded, so it costs seconds."""
    status = subprocess.run([*snakemake, "--report", str(REPORT.relative_to(REPO))], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT).returncode
    print("\nfigures:", *(f"  {path.relative_to(REPO)}" for path in sorted(COMPARE.glob("*.png"))), sep="\n")
    print(f"report:  {REPORT.relative_to(REPO)}" if status == 0 else f"snakemake --report failed (exit {status})")
    return status


if __name__ == "__main__":
    sys.exit(main())
