"""The equivalence study can fail: a resume bug injected at the hop is reported.

Three seeds, each trained unbroken (the pinned twin: one job, 4 epochs) and in two chunks of 2
epochs whose second chunk re-creates the optimizer and LR schedule ($PROTEIN_LM_INJECT_RESUME_BUG).
The data is the tiny set made learnable in 4 epochs (300 variants of 6 sites, lr 0.01: val loss
0.85-0.94 of the mean predictor's); on the 120-variant set nothing is learnt in 4 epochs and
the deltas are noise. Measured: val-loss deltas -0.147, -0.261, -0.345; 90% CI [-0.418, -0.083]
against the config's margin 0.02. docs/protein_lm.md gives the demo-scale numbers.
"""
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

from protein_lm import checkpoint
from protein_lm.compare import Margins, Plan, RunResult, equivalence_rows, provenance_checks, summary_rows
from protein_lm.evaluation import evaluate_checkpoint
from protein_lm.runtime import cpu_model
from protein_lm.training import RESUME_BUG_VARIABLE, ChunkJob, SelfCheckpoint, train_chunk

from protein_lm.data import DataConfig, generate

from .conftest import TINY_DATA, WORKFLOW

pytestmark = pytest.mark.slow  # 20-45 s of training on one core
EPOCHS, SEEDS = 4, (1, 2, 3)
LEARNABLE = TINY_DATA | {"n_variants": 300, "library_sites": 6, "max_mutations": 2, "epistatic_pairs": 2}


def train(data: Path, params, directory: Path, name: str, epochs_per_job: int) -> Path:
    previous = None
    for chunk in range(1, EPOCHS // epochs_per_job + 1):
        output = directory / f"{name}-{chunk}.pt"
        train_chunk(ChunkJob(f"run-{params.seed}", params, data, chunk, epochs_per_job, EPOCHS, previous, output,
                             SelfCheckpoint(directory / f"self-{name}.pt", 0, False), 1))
        previous = output
    return previous


def result(path: Path, data: Path, variant: str, seed: int) -> RunResult:
    return RunResult(f"run-{seed}", variant, {"seed": seed}, "tiny", [evaluate_checkpoint(path, data, 1)], {"spearman": None})


def test_a_resume_bug_at_the_hop_is_not_equivalent(tiny_params, tmp_path, monkeypatch):
    data = tmp_path / "simulated.npz"
    generate(DataConfig(**LEARNABLE), data, tmp_path / "experimental.npz", tmp_path / "metadata.json")
    settings = yaml.safe_load((WORKFLOW / "config" / "config.yaml").read_text())["compare"]
    margins = Margins(settings["margin"], settings["alpha"], settings["power"])
    results = []
    for seed in SEEDS:
        params = replace(tiny_params, seed=seed, lr=0.01, dropout=0.0)
        unbroken = train(data, params, tmp_path, f"unbroken-{seed}", EPOCHS)
        with monkeypatch.context() as patch:
            patch.setenv(RESUME_BUG_VARIABLE, "fresh-optimizer")
            hopping = train(data, params, tmp_path, f"hopping-{seed}", EPOCHS // 2)
        results += [result(unbroken, data, "baseline", seed), result(hopping, data, "distributed", seed)]

    plan = Plan(EPOCHS, {"distributed": {"first_chunk": 1, "epochs_per_job": EPOCHS // 2}, "baseline": {"first_chunk": 1, "epochs_per_job": EPOCHS}})
    checks = provenance_checks(results, plan, jobs=None)
    (val_loss, _) = equivalence_rows(results, checks, margins)
    assert val_loss["verdict"].startswith("not equivalent (90% CI"), (val_loss["deltas"], val_loss["verdict"])
    assert val_loss["ci_high"] < -margins.margin["val_loss"] or val_loss["ci_low"] > margins.margin["val_loss"]
    # The same-hardware check sees it run by run, without statistics.
    assert {row["verdict"] for row in summary_rows(results, checks)} == {
        f"ERROR: differs from its twin on the same hardware (cpu ({cpu_model()}) fp32 {torch.__version__}): a resume bug"}
    assert all(checkpoint.load(tmp_path / f"hopping-{seed}-2.pt")["segments"][-1]["injected_resume_bug"] == "fresh-optimizer"
               for seed in SEEDS)
