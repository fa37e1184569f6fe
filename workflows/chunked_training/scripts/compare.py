"""Rule compare: one row per run, its swept values, whether the twins' final checkpoints are
bitwise equal, each number the evaluation wrote for both twins with their difference, and an MLDAG
experiment's study metric of both twins, their difference and whether it is within the margin."""
import csv
import hashlib
import json
import logging
from pathlib import Path

snakemake = globals()["snakemake"]  # injected by Snakemake's script directive
logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def final_evaluation(variant: str, run: str) -> dict:
    suffix = f"/{variant}/{run}/chunk-{snakemake.params.final_chunk}.json"
    found = [path for path in snakemake.input.evaluations if path.endswith(suffix)]
    return json.loads(Path(found[0]).read_text()) if found else {}


rows = []
for index, (run, swept) in enumerate(snakemake.params.runs.items()):
    row = {"run": run, **swept}
    if snakemake.input.baseline and snakemake.params.bitwise:
        row["twins"] = ("identical (bitwise)" if digest(snakemake.input.distributed[index]) ==
                        digest(snakemake.input.baseline[index]) else "differ")
    if study := snakemake.params.study:
        metric = study["metric"]
        values = [json.loads(Path(path).read_text())[metric] for path in study["files"][run]]
        delta = values[0] - values[1]
        row |= {f"{metric}:distributed": values[0], f"{metric}:baseline": values[1], f"{metric}:delta": delta,
                "margin": study["margin"], "within margin": abs(delta) < study["margin"]}
    distributed, baseline = final_evaluation("distributed", run), final_evaluation("baseline", run)
    for metric, value in distributed.items():
        if isinstance(value, (int, float)) and isinstance(baseline.get(metric), (int, float)):
            row |= {f"{metric}:distributed": value, f"{metric}:baseline": baseline[metric],
                    f"{metric}:delta": value - baseline[metric]}
    rows.append(row)
    logging.info("%s", row)

with open(snakemake.output.summary, "w", newline="") as handle:
    writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(key for row in rows for key in row)),
                            delimiter="\t")
    writer.writeheader()
    writer.writerows(rows)
