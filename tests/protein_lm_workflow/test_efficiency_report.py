"""protein_lm's efficiency_report rule: `htcannex report`'s figures in `snakemake --report`."""
import csv
import os
import shutil

import pytest

from .conftest import REPO, WORKFLOW, snakemake, tiny_config


@pytest.mark.slow
def test_efficiency_figures_in_the_snakemake_report(tmp_path, embedded_pool):
    workdir = tmp_path / "protein_lm"
    ignore = shutil.ignore_patterns("__pycache__", "results", "logs", ".snakemake")
    shutil.copytree(WORKFLOW, workdir, ignore=ignore)
    # the rules it is built on, next to it as in the repository
    shutil.copytree(WORKFLOW.parent / "chunked_training", tmp_path / "chunked_training", ignore=ignore)
    tiny_config(workdir, sweep={"seed": {"list": [1]}})
    env = dict(os.environ, HTCANNEX_POOL_DIR=str(embedded_pool.spool_dir))
    args = ["--configfile", "tiny.yaml"]
    # the target first: --configfile takes every word after it
    run = snakemake(workdir, "efficiency_report", "--executor", "htcannex", "--profile",
                    str(REPO / "profiles" / "local"), *args, env=env, timeout=900, snakefile=workdir / "Snakefile")
    assert run.returncode == 0, run.stdout[-4000:]

    with open(workdir / "results" / "efficiency" / "jobs.tsv") as table:
        jobs = list(csv.DictReader(table, delimiter="\t"))
    # every pool job of the run is a row, done, with its annex as the site
    assert jobs and all(job["state"] == "done" for job in jobs)
    assert {"htcannex-expanse"} <= {job["site"] for job in jobs}
    assert all(float(job["memory_requested_mb"]) > 0 for job in jobs)

    report = snakemake(workdir, "efficiency_report", "--report", "report.html", *args, env=env,
                       snakefile=workdir / "Snakefile")
    assert report.returncode == 0, report.stdout[-4000:]
    html = (workdir / "report.html").read_text()
    for figure in ("sites.png", "timeline.png", "requests.png", "jobs.tsv"):
        assert figure in html
