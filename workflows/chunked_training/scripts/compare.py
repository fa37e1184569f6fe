"""Rule compare: one row per run, its swept values, whether the twins' final checkpoints are
bitwise equal, and each number the evaluation wrote for both twins with their difference. An MLDAG
experiment with a study instead gets the study on its metric (chunked_training.twin_study): each
run against its twin (summary), the paired equivalence study per seed group (equivalence), and
the files and digests its numbers came from (provenance), and the study's figure; rule check
judges them."""
import csv
import hashlib
import json
import logging
from pathlib import Path

snakemake = globals()["snakemake"]  # injected by Snakemake's script directive
logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)


def write_table(rows: list[dict], path: str) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(key for row in rows for key in row)),
                                delimiter="\t", lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()} for row in rows)


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def final_evaluation(variant: str, run: str) -> dict:
    suffix = f"/{variant}/{run}/chunk-{snakemake.params.final_chunk}.json"
    found = [path for path in snakemake.input.evaluations if path.endswith(suffix)]
    return json.loads(Path(found[0]).read_text()) if found else {}


if snakemake.params.study:
    from chunked_training.equivalence_figure import figure
    from chunked_training.experiment import Study
    from chunked_training.twin_study import compare

    settings = dict(snakemake.params.study)
    files = settings.pop("files")
    summary, study, provenance = compare(snakemake.params.runs, files, Study(**settings))
    write_table(summary, snakemake.output.summary)
    write_table(study, snakemake.output.equivalence)
    write_table(provenance, snakemake.output.provenance)
    figure(study, settings["alpha"], snakemake.output.equivalence_figure)
    for row in study:
        logging.info("%s", row)
else:
    rows = []
    for index, (run, swept) in enumerate(snakemake.params.runs.items()):
        row = {"run": run, **swept}
        if snakemake.input.baseline and snakemake.params.bitwise:
            row["twins"] = ("identical (bitwise)" if digest(snakemake.input.distributed[index]) ==
                            digest(snakemake.input.baseline[index]) else "differ")
        distributed, baseline = final_evaluation("distributed", run), final_evaluation("baseline", run)
        for metric, value in distributed.items():
            if isinstance(value, (int, float)) and isinstance(baseline.get(metric), (int, float)):
                row |= {f"{metric}:distributed": value, f"{metric}:baseline": baseline[metric],
                        f"{metric}:delta": value - baseline[metric]}
        rows.append(row)
        logging.info("%s", row)
    write_table(rows, snakemake.output.summary)
