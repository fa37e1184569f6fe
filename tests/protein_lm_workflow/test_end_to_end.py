"""The whole workflow through the snakemake CLI: local executor, and htcannex on the embedded pool."""
import csv
import os
import re
import shutil
import threading
from pathlib import Path

import pytest
import torch

from protein_lm import checkpoint
from protein_lm.job_environment import CHECKPOINT_EXIT_MARKER_VARIABLE
from protein_lm.runtime import cpu_model

from .conftest import REPO, WORKFLOW, planned_run, snakemake, tiny_config

pytestmark = pytest.mark.slow


def table(workdir: Path, name: str) -> list[dict]:
    with open(workdir / "results" / "compare" / name) as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def summary(workdir: Path) -> list[dict]:
    return table(workdir, "summary.tsv")


def final_states(checkpoints: Path, variant: str) -> list[dict]:
    """The last checkpoint (chunk 2) of each run of `variant` under `checkpoints`."""
    return [checkpoint.load(p) for p in sorted((checkpoints / variant).glob("*/*-chunk-2.pt"))]


ONE_SEED = {"seed": {"list": [1]}}  # merged into the default sweep: keep its form


def test_local_executor_end_to_end_with_osdf_checkpoints_and_report(tmp_path):
    """The local executor, checkpoints as OSDF objects (the osdf provider's local origin)."""
    config = tiny_config(tmp_path, sweep=ONE_SEED, checkpoint_store="osdf", osdf_prefix="osdf:///plm/test")
    origin = tmp_path / "origin"
    origin.mkdir()
    osdf = ("--storage-osdf-backend", "local", "--storage-osdf-local-origin", str(origin))
    result = snakemake(tmp_path, "--cores", "2", *osdf, "--configfile", str(config), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    rows = summary(tmp_path)
    assert [row["param:seed"] for row in rows] == ["1"]
    # Same machine, same code: the distributed twin is bitwise the baseline.
    assert (rows[0]["verdict"], rows[0]["bitwise"]) == ("identical (bitwise)", "yes")
    assert float(rows[0]["spearman:delta"]) == 0
    assert (tmp_path / "results" / "compare" / "check.txt").read_text().endswith("all checks passed\n")
    # The local executor shows no HTCondor ads: provenance is said to be unchecked, not ok.
    assert {row["state"] for row in table(tmp_path, "provenance.tsv")} == {"not checked"}
    study = table(tmp_path, "equivalence.tsv")
    assert [(row["metric"], row["verdict"]) for row in study] == [
        ("val_loss", "identical (every delta 0)"), ("spearman", "identical (every delta 0)")]
    stored = sorted(str(p.relative_to(origin)) for p in origin.rglob("*-chunk-*"))
    # 2 distributed chunks and the twin's one job, each with its sidecar.
    assert len(stored) == 6 and sum(name.endswith(".pt.sha256") for name in stored) == 3
    assert not (tmp_path / "results" / "checkpoints").exists()
    for name in ("loss_curves.png", "site_timeline.png", "epoch_time_per_site.png", "equivalence.png"):
        assert (tmp_path / "results" / "compare" / name).read_bytes().startswith(b"\x89PNG")
    metadata = (tmp_path / "results" / "data" / "SYNTHETIC_metadata.json").read_text()
    assert '"SYNTHETIC": true' in metadata
    # The data goes through the checkpoint store too: objects in the origin, no local copy.
    assert {p.name for p in origin.glob("plm/test/protein_lm/data-*/*")} == {
        f"SYNTHETIC_{kind}_scores.npz{suffix}" for kind in ("simulated", "experimental") for suffix in ("", ".sha256")}
    assert not list((tmp_path / "results" / "data").glob("*.npz"))

    report = snakemake(tmp_path, *osdf, "--report", "report.html", "--configfile", str(config))
    assert report.returncode == 0, report.stdout[-3000:]
    assert (tmp_path / "report.html").stat().st_size > 10_000


def test_a_resume_bug_fails_the_workflow_naming_the_run_and_the_check(tmp_path):
    """A negative control through the snakemake CLI: the check rule ends the workflow non-zero,
    printing the tables and one FAILED CHECK line per failure; allowing real differences does not
    let a bug on the same hardware pass."""
    config = tiny_config(tmp_path, sweep=ONE_SEED, inject_resume_bug="optimizer-moments")
    run = planned_run(tmp_path, "--configfile", str(config))
    result = snakemake(tmp_path, "--cores", "2", "--configfile", str(config), timeout=600)
    assert result.returncode != 0
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED CHECK:")]
    assert failed == [f"FAILED CHECK: run {run}: twin check: ERROR: differs from its twin on the same hardware "
                      f"(cpu ({cpu_model()}) fp32 {torch.__version__}): a resume bug"], result.stdout[-3000:]
    assert "equivalence study (results/compare/equivalence.tsv):" in result.stdout
    assert failed[0] in (tmp_path / "results" / "logs" / "check.log").read_text()
    assert not (tmp_path / "results" / "compare" / "check.txt").exists()
    allowed = snakemake(tmp_path, "--cores", "2", "--configfile", str(config), "--config", "allow_not_equivalent=true")
    assert allowed.returncode != 0 and failed[0] in allowed.stdout


def test_exit_85_path_through_snakemake_resumes_bitwise(tmp_path):
    """What HTCondor does with checkpoint_exit_code, played by hand: the job's Snakemake fails
    (status 1) leaving the self-checkpoint and the exit-code marker; the job runs again."""
    target = "results/protein_lm/checkpoints/distributed/{run}/distributed-{run}-chunk-1.pt"
    unbroken_dir, evicted_dir = tmp_path / "unbroken", tmp_path / "evicted"
    for workdir in (unbroken_dir, evicted_dir):
        workdir.mkdir()
        tiny_config(workdir, sweep=ONE_SEED)
    run = planned_run(unbroken_dir, "--configfile", "tiny.yaml")
    args = (target.format(run=run), "--cores", "1", "--configfile", "tiny.yaml")  # --configfile takes all that follows
    assert snakemake(unbroken_dir, *args).returncode == 0

    marker = "checkpoint-exit"  # the htcannex job wrapper names it in the job's environment
    env = dict(os.environ, PROTEIN_LM_SELF_CHECKPOINT="stop", **{CHECKPOINT_EXIT_MARKER_VARIABLE: marker})
    stopped = snakemake(evicted_dir, *args, env=env)
    assert stopped.returncode == 1
    assert (evicted_dir / marker).read_text().strip() == "85"
    assert (evicted_dir / f"selfckpt-distributed-{run}-1.pt").exists()
    (evicted_dir / marker).unlink()  # as the htcannex job wrapper does
    resumed = snakemake(evicted_dir, *args, env=env)
    assert resumed.returncode == 0, resumed.stdout[-3000:]

    a = checkpoint.load(unbroken_dir / target.format(run=run))
    b = checkpoint.load(evicted_dir / target.format(run=run))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    assert len(b["segments"]) == 2 and len(a["segments"]) == 1


def checkpoints_seen_in(workdir: Path, stop: threading.Event, seen: set) -> None:
    """Every chunk file that shows up anywhere under the working directory while the run goes on."""
    while not stop.wait(0.5):
        seen.update(str(path.relative_to(workdir)) for path in workdir.rglob("*-chunk-*.pt*"))


def test_htcannex_executor_on_the_embedded_pool(tmp_path, embedded_pool):
    """A copy of the workflow directory run with --profile profiles/local (jobs get the files Snakemake ships,
    chunked_training's from outside the workdir).
    train_chunk hops between annexes, train_baseline stays on one, chunks self-checkpoint
    (exit 85) and resume, the twins still end bitwise equal, and the profile hands every
    checkpoint through the pool's OSDF origin as URL transfers, never through the working directory.
    Then, as rules/efficiency.smk says to, the run's efficiency report and its figures in `snakemake --report`."""
    workdir = tmp_path / "protein_lm"
    ignore = shutil.ignore_patterns("__pycache__", "results", "logs", ".snakemake")
    shutil.copytree(WORKFLOW, workdir, ignore=ignore)
    # The rules it is built on, next to it as in the repository: sources outside the workdir.
    shutil.copytree(WORKFLOW.parent / "chunked_training", tmp_path / "chunked_training", ignore=ignore)
    tiny_config(workdir, sweep=ONE_SEED)
    # Not created beforehand: a fresh clone has no origin until the first run makes it.
    origin = embedded_pool.origin_dir
    env = dict(os.environ, HTCANNEX_POOL_DIR=str(embedded_pool.spool_dir))
    stop, seen = threading.Event(), set()
    watcher = threading.Thread(target=checkpoints_seen_in, args=(workdir, stop, seen))
    watcher.start()
    try:
        result = snakemake(workdir, "--executor", "htcannex", "--profile", str(REPO / "profiles" / "local"),
                           "--configfile", "tiny.yaml", env=env, timeout=900, snakefile=workdir / "Snakefile")
    finally:
        stop.set()
        watcher.join()
    assert result.returncode == 0, result.stdout[-4000:]
    assert not seen, sorted(seen)

    rows = summary(workdir)
    assert len(rows) == 1 and rows[0]["verdict"] == "identical (bitwise)"
    # Every epoch in its planned job, slot and annex, as the event log says.
    provenance = table(workdir, "provenance.tsv")
    assert [row["state"] for row in provenance] == ["ok", "ok"], provenance
    run = rows[0]["run"]
    (training_set,) = (origin / "htcannex" / "protein_lm").glob("set-*")
    (data_set,) = (origin / "htcannex" / "protein_lm").glob("data-*")
    assert (data_set / "SYNTHETIC_simulated_scores.npz.sha256").exists()
    stored = sorted(str(p.relative_to(training_set)) for p in training_set.rglob("*-chunk-*"))
    # The twin trains unbroken: one job, one checkpoint named after the last chunk.
    assert stored == [f"{variant}/{run}/{variant}-{run}-chunk-{chunk}.pt{suffix}"
                      for variant, chunk in (("baseline", 2), ("distributed", 1), ("distributed", 2))
                      for suffix in ("", ".sha256")]
    # Chunk 2 read chunk 1 from the origin and wrote to it: both directions are URL transfers.
    ads = embedded_pool.schedd().history("true", ["HtcannexRule", "TransferInput", "TransferOutputRemaps",
                                                  "Arguments"])
    chunk_twos = [ad for ad in ads if ad.get("HtcannexRule") in ("train_chunk", "train_baseline")
                  and "-chunk-1.pt" in str(ad.get("TransferInput", ""))]
    assert chunk_twos
    for ad in chunk_twos:
        assert "osdf:///htcannex/protein_lm/" in ad["TransferInput"]
        assert "osdf:///htcannex/protein_lm/" in ad["TransferOutputRemaps"]
    # Every training job reads the data from the origin, not from the access point's results/.
    trainings = [ad for ad in ads if ad.get("HtcannexRule") in ("train_chunk", "train_baseline")]
    data_url = f"osdf:///htcannex/protein_lm/{data_set.name}/SYNTHETIC_simulated_scores.npz"
    assert trainings and all(data_url in ad["TransferInput"] and "results/data" not in ad["TransferInput"]
                             for ad in trainings), [ad["TransferInput"] for ad in trainings]
    # Each runs the training command without Snakemake in the job (its OSDF objects need none).
    assert not [ad["Arguments"] for ad in trainings if "--target-jobs" in ad["Arguments"]]

    for state in final_states(training_set, "distributed"):
        sites = [epoch["site"] for epoch in state["history"]]
        assert len(set(sites)) == 2, sites  # chunk 1 and chunk 2 ran on different annexes
        assert len(state["segments"]) > 2  # at least one self-checkpoint restart
    for state in final_states(training_set, "baseline"):
        assert {epoch["site"] for epoch in state["history"]} == {"htcannex-expanse"}
        assert {segment["chunk"] for segment in state["segments"]} == {2}  # every epoch in the one job
    assert_efficiency_report(workdir, env)


def assert_efficiency_report(workdir: Path, env: dict) -> None:
    """protein_lm's efficiency_report rule after a run: `htcannex report`'s figures in `snakemake --report`."""
    args = ["--configfile", "tiny.yaml"]  # the target first: --configfile takes every word after it
    run = snakemake(workdir, "efficiency_report", "--executor", "htcannex", "--profile",
                    str(REPO / "profiles" / "local"), *args, env=env, timeout=900, snakefile=workdir / "Snakefile")
    assert run.returncode == 0, run.stdout[-4000:]
    with open(workdir / "results" / "efficiency" / "jobs.tsv") as handle:
        jobs = list(csv.DictReader(handle, delimiter="\t"))
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


def test_each_chunk_job_trains_only_its_own_chunk_with_local_checkpoints(tmp_path, embedded_pool):
    """checkpoint_store: local through htcannex, three chunks: the executor transfers each
    checkpoint as a file and the pool gives every input the transfer's second as mtime, as HTCondor
    does; each chunk's job still runs its own step only (one_step.py), so every epoch is trained
    once, on its chunk's site (on a real pool the chunk-3 job retrained chunks 1 and 2)."""
    workdir = tmp_path / "protein_lm"
    ignore = shutil.ignore_patterns("__pycache__", "results", "logs", ".snakemake")
    shutil.copytree(WORKFLOW, workdir, ignore=ignore)
    shutil.copytree(WORKFLOW.parent / "chunked_training", tmp_path / "chunked_training", ignore=ignore)
    tiny_config(workdir, sweep=ONE_SEED, checkpoint_store="local",
                pretrain={"chunks": 3, "epochs_per_job": 1, "checkpoint_every_steps": 10_000, "threads": 1})
    env = dict(os.environ, HTCANNEX_POOL_DIR=str(embedded_pool.spool_dir))
    run = planned_run(workdir, "--config", "checkpoint_store=local", "--configfile", "tiny.yaml",
                      snakefile=workdir / "Snakefile")
    target = f"results/protein_lm/checkpoints/distributed/{run}/distributed-{run}-chunk-3.pt"
    result = snakemake(workdir, target, "--executor", "htcannex", "--profile", str(REPO / "profiles" / "local"),
                       "--config", "checkpoint_store=local", "--configfile", "tiny.yaml",
                       env=env, timeout=900, snakefile=workdir / "Snakefile")
    assert result.returncode == 0, result.stdout[-4000:]
    job_logs = sorted((workdir / ".htcannex" / "logs").glob("train_chunk-*.err"))
    assert len(job_logs) == 3
    for log in job_logs:
        totals = {total for _, total in re.findall(r"(\d+) of (\d+) steps", log.read_text())}
        # A local checkpoint makes train_chunk a plain shell job (no Snakemake in it): no steps at all.
        assert totals <= {"1"}, f"{log.name}: {totals}"
    final = checkpoint.load(workdir / target)
    sites = [epoch["site"] for epoch in final["history"]]
    assert len(sites) == 3 and sites[0] != sites[1], sites  # one epoch per chunk, hopping
