"""Provenance: every epoch trained once, in its planned job and site, as the event log says.

The jobs here are played by hand: each gets the machine and job ad files HTCondor (and the
embedded pool) write into the sandbox, and the event log is written in HTCondor's text format.
"""
import json
from dataclasses import replace
from pathlib import Path

import pytest
from event_log_text import execute, submit, terminated

from protein_lm import checkpoint
from protein_lm.compare import Plan, RunResult, provenance_checks
from protein_lm.training import train_chunk
from snakemake_executor_plugin_htcannex.ops import provenance

from .test_training import job

PLAN = Plan(total_epochs=2, chunks={"distributed": {"first_chunk": 1, "epochs_per_job": 1}, "baseline": {"first_chunk": 1, "epochs_per_job": 2}})


class Condor:
    """The ads a job sees, and the user event log the access point writes."""

    def __init__(self, root: Path, monkeypatch):
        self.root, self.monkeypatch, self.events = root, monkeypatch, []
        monkeypatch.delenv("HTCANNEX_SITE", raising=False)

    def run_as(self, cluster: int, chunk: int, annex: str, planned: str | None = None, exit_code: int = 0) -> None:
        machine, ad = self.root / f"{cluster}.machine.ad", self.root / f"{cluster}.job.ad"
        machine.write_text(f'AnnexName = "{annex}"\nName = "slot1@{annex}"\n')
        wildcards = json.dumps({"run": "run-a", "chunk": str(chunk)}).replace('"', '\\"')
        ad.write_text(f'ClusterId = {cluster}\nProcId = 0\nTargetAnnexName = "{planned or annex}"\n'
                      f'HtcannexRule = "train_chunk"\nHtcannexWildcards = "{wildcards}"\n')
        self.monkeypatch.setenv("_CONDOR_MACHINE_AD", str(machine))
        self.monkeypatch.setenv("_CONDOR_JOB_AD", str(ad))
        job = f"{cluster:03d}.000"
        self.events += [submit(job), execute(job, f"slot1@{annex}"), terminated(job, exit_code)]

    def event_log(self) -> dict:
        path = self.root / "jobs.log"
        path.write_text("".join(self.events))
        return provenance.executions(path)


@pytest.fixture
def condor(tmp_path, monkeypatch) -> Condor:
    return Condor(tmp_path, monkeypatch)


def chunk_job(tiny_data, tiny_params, directory: Path, chunk: int, previous: Path | None = None):
    spec = job(tiny_data, tiny_params, directory, chunk, 1, "c")
    spec = replace(spec, total_epochs=2)
    return spec if previous is None else replace(spec, previous=previous)


def final_check(path: Path, jobs) -> provenance.Check:
    result = RunResult("run-a", "distributed", {}, "g", [checkpoint.load(path)], {})
    return provenance_checks([result], PLAN, jobs)[("run-a", "distributed")]


def test_each_chunk_in_its_own_job_and_site_checks_out(tiny_data, tiny_params, tmp_path, condor):
    condor.run_as(7, chunk=1, annex="htcannex-anvil")
    train_chunk(chunk_job(tiny_data, tiny_params, tmp_path, 1))
    condor.run_as(8, chunk=2, annex="htcannex-delta")
    train_chunk(chunk_job(tiny_data, tiny_params, tmp_path, 2))
    check = final_check(tmp_path / "c-2.pt", condor.event_log())
    assert check.summary() == "ok: 2 epochs, each once, in its planned job and site"


def test_a_chunk_job_that_retrains_the_chunk_before_is_flagged(tiny_data, tiny_params, tmp_path, condor):
    """A failure seen on a real pool: chunk 2's job retrains chunk 1 in its sandbox (its in-job
    Snakemake trusted transfer-time mtimes), then trains chunk 2 from that."""
    condor.run_as(7, chunk=1, annex="htcannex-anvil")
    train_chunk(chunk_job(tiny_data, tiny_params, tmp_path, 1))
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    condor.run_as(8, chunk=2, annex="htcannex-delta")
    train_chunk(chunk_job(tiny_data, tiny_params, sandbox, 1))
    train_chunk(chunk_job(tiny_data, tiny_params, sandbox, 2))
    check = final_check(sandbox / "c-2.pt", condor.event_log())
    assert check.state == "ERROR"
    assert check.problems == ("epoch 1 trained in job 8.0, which was submitted for chunk 2 (the plan: chunk 1)",)


def test_wrong_site_slot_unknown_or_failed_job_are_flagged(tiny_data, tiny_params, tmp_path, condor):
    condor.run_as(7, chunk=1, annex="htcannex-anvil", planned="htcannex-expanse")
    train_chunk(chunk_job(tiny_data, tiny_params, tmp_path, 1))
    condor.run_as(8, chunk=2, annex="htcannex-delta", exit_code=1)
    train_chunk(chunk_job(tiny_data, tiny_params, tmp_path, 2))
    jobs = condor.event_log()
    check = final_check(tmp_path / "c-2.pt", jobs)
    assert check.problems == ("epoch 1 trained on htcannex-anvil, its job 7.0 was sent to htcannex-expanse",
                              "epoch 2 trained in job 8.0, which did not end with exit 0")
    jobs["8.0"].slots = {"slot2@elsewhere"}
    del jobs["7.0"]
    assert final_check(tmp_path / "c-2.pt", jobs).problems[1:] == (
        "epoch 1 trained in job 7.0, which the event log does not know",
        "epoch 2 trained in slot slot1@htcannex-delta, job 8.0 ran in slot2@elsewhere per the event log")


def test_outside_htcondor_nothing_is_claimed(tiny_data, tiny_params, tmp_path, monkeypatch):
    for name in ("_CONDOR_MACHINE_AD", "_CONDOR_JOB_AD", "HTCANNEX_SITE"):
        monkeypatch.delenv(name, raising=False)
    train_chunk(chunk_job(tiny_data, tiny_params, tmp_path, 1))
    train_chunk(chunk_job(tiny_data, tiny_params, tmp_path, 2))
    check = final_check(tmp_path / "c-2.pt", provenance.executions(tmp_path / "no-such.log"))
    assert check.summary() == "not checked: 2 of 2 epochs trained outside HTCondor (no job ad)"
