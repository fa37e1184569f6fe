"""Rule compare: provenance, bitwise twins and the paired equivalence study, as tables and figures.

Runs where Snakemake runs (localrule): the user event log of the htcannex executor is there, and
every epoch's job is checked against it; without one (another executor) the table says so. It
reads only the evaluations' JSON (history, segments and weights digest of each final
checkpoint), so no checkpoint is fetched to the access point.
"""
import csv
import json
from pathlib import Path

from protein_lm import plots
from protein_lm.compare import (
    VARIANTS, Plan, RunResult, equivalence_rows, finetune_size_rows, per_site_rows, provenance_checks, provenance_rows, summary_rows,
)
from chunked_training.equivalence import Margins
from chunked_training.equivalence_figure import figure as equivalence_figure
from snakemake_executor_plugin_htcannex import paths
from snakemake_executor_plugin_htcannex.ops import provenance

snakemake = globals()["snakemake"]  # injected by Snakemake's script directive
runs = snakemake.params.runs
pairs = [(run, variant) for run in runs for variant in VARIANTS]  # the order of the rule's inputs
results = [
    RunResult(
        run_id=run, variant=variant, swept=runs[run]["swept"], seed_group=runs[run]["seed_group"],
        evaluations=[json.loads(Path(p).read_text()) for p in snakemake.params.evaluations[i]],
        finetune=json.loads(Path(snakemake.input.finetunes[i]).read_text()),
    )
    for i, (run, variant) in enumerate(pairs)
]


def write_table(rows: list[dict], path: str) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()} for row in rows)


plan = Plan.from_dict(snakemake.params.plan)
checks = provenance_checks(results, plan, provenance.executions(paths.event_log()))
settings = snakemake.params.compare
margins = Margins(margin=settings["margin"], alpha=settings["alpha"], power=settings["power"])
study = equivalence_rows(results, checks, margins)
write_table(summary_rows(results, checks), snakemake.output.summary)
write_table(study, snakemake.output.equivalence)
write_table(provenance_rows(results, checks), snakemake.output.provenance)
write_table(per_site_rows(results), snakemake.output.per_site)
sizes = finetune_size_rows(results)
write_table(sizes, snakemake.output.finetune_sizes)
plots.finetune_sizes(sizes, snakemake.output.finetune_sizes_figure)
equivalence_figure(study, margins.alpha, snakemake.output.equivalence_figure)
plots.loss_curves(results, snakemake.output.loss_curves)
plots.site_timeline(results, snakemake.output.site_timeline)
plots.epoch_time_per_site(results, snakemake.output.epoch_times)
