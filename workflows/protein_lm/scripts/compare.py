"""Rule compare: tables and figures of distributed runs against their baselines."""
import csv
import json
from pathlib import Path

from protein_lm import checkpoint, plots
from protein_lm.compare import VARIANTS, RunResult, per_site_rows, summary_rows

snakemake = globals()["snakemake"]  # injected by Snakemake's script directive
runs = snakemake.params.runs
pairs = [(run, variant) for run in runs for variant in VARIANTS]  # the order of the rule's inputs
results = [
    RunResult(
        run_id=run, variant=variant, swept=runs[run]["swept"], seed_group=runs[run]["seed_group"],
        state=checkpoint.load(snakemake.input.checkpoints[i]),
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


settings = snakemake.params.compare
write_table(summary_rows(results, settings["equivalence_k"], settings["min_seeds"]), snakemake.output.summary)
write_table(per_site_rows(results), snakemake.output.per_site)
plots.loss_curves(results, snakemake.output.loss_curves)
plots.site_timeline(results, snakemake.output.site_timeline)
plots.epoch_time_per_site(results, snakemake.output.epoch_times)
