"""Rule check: the run's verdict, in every workflow with a twin study (chunked_training's MLDAG
experiments, protein_lm). Prints each run's twin check and the study (compare's tables, the
columns the rule's params name); when a check failed, names each failure (FAILED CHECK: the run
or seed group, the check, the verdict) and exits 1, so the workflow ends non-zero and
`htcannex status` shows the lines.
"""
import csv
import sys
from pathlib import Path

from chunked_training.equivalence import failed_checks
from snakemake_executor_plugin_htcannex.ops.driver_status import FAILED_CHECK

snakemake = globals()["snakemake"]  # injected by Snakemake's script directive


def table(path: str, columns: list[str]) -> tuple[list[dict], list[str]]:
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    shown = [[row.get(column, "") for column in columns] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(columns, *shown)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in [columns, *shown]]
    return rows, lines


summary, summary_lines = table(snakemake.input.summary, snakemake.params.summary_columns)
study, study_lines = table(snakemake.input.equivalence, snakemake.params.study_columns)
allowed = snakemake.params.allow_not_equivalent
reasons = failed_checks(summary, study, allowed)
report = [f"twin check per run ({snakemake.input.summary}):", *summary_lines, "",
          f"equivalence study ({snakemake.input.equivalence}):", *study_lines, ""]
if reasons:
    report += [f"{FAILED_CHECK} {reason}" for reason in reasons]
    if not allowed and any("study:" in reason for reason in reasons):
        report.append("(a study of real differences, e.g. other hardware on purpose: rerun with --config allow_not_equivalent=true)")
else:
    report.append("all checks passed" + (" (study verdicts beyond the margin allowed: allow_not_equivalent)" if allowed else ""))
text = "\n".join(report) + "\n"
Path(snakemake.log[0]).write_text(text)
print(text, file=sys.stderr, end="", flush=True)
if reasons:
    sys.exit(1)
Path(snakemake.output[0]).write_text(text)
