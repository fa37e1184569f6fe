"""Writes what the snakemake object holds, as a script rule sees it."""
import json
import os
import shutil
from pathlib import Path

snakemake = globals()["snakemake"]
with open(snakemake.log[0], "w") as log:
    log.write(f"rule {snakemake.rule}, {snakemake.threads} threads\n")
shutil.copy(snakemake.input.data, snakemake.output.duplicate)
report = {
    "input": list(snakemake.input), "input_names": list(snakemake.input.keys()),
    "output": dict(snakemake.output.items()), "log": list(snakemake.log),
    "params": {name: value for name, value in snakemake.params.items()},
    "wildcards": dict(snakemake.wildcards.items()), "threads": snakemake.threads,
    "resources": {"mem_mb": snakemake.resources.mem_mb, "flavour": snakemake.resources.flavour},
    "config": snakemake.config, "rule": snakemake.rule,
    "data": Path(snakemake.input.data).read_text(),
    "next_to_script": Path(snakemake.scriptdir, "greeting.txt").read_text(),
    "file": Path(__file__).name,
}
Path(snakemake.output.report).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
