"""The comparison: bitwise twins, hardware labels, provenance errors and the paired equivalence study."""
import pytest
import torch

from protein_lm import checkpoint
from protein_lm.compare import (
    Plan, RunResult, equivalence_rows, finetune_size_rows, per_site_rows, provenance_checks, summary_rows,
)
from chunked_training.equivalence import Margins

CPU = {"device": "cpu", "precision": "fp32", "torch": "2.13.0"}
GPU = {"device": "NVIDIA H100", "precision": "bf16-autocast", "torch": "2.13.0"}
PLAN = Plan(total_epochs=2, chunks={"distributed": {"first_chunk": 1, "epochs_per_job": 1}, "baseline": {"first_chunk": 1, "epochs_per_job": 2}})
MARGINS = Margins(margin={"val_loss": 0.05, "spearman": 0.05}, alpha=0.05, power=0.8)


def epochs(variant: str, hardware: list[dict], job_chunks=None) -> list[dict]:
    """Two epochs as training records them; the distributed run trains one per chunk (job 1.0, 2.0),
    the baseline both in one job (3.0)."""
    records = []
    for epoch, kind in zip((1, 2), hardware):
        chunk = epoch if variant == "distributed" else 1
        job_chunk = (job_chunks or {}).get(epoch, chunk)
        records.append({"epoch": epoch, "chunk": chunk, "train_loss": 1.0, "wall_s": 2.0, "site": "a", "slot": "slot1@a",
                        "job": f"{job_chunk if variant == 'distributed' else 3}.0", "planned_site": "a",
                        "job_wildcards": {"run": "ignored", "chunk": str(job_chunk)}, **kind})
    return records


def result(run_id, variant, seed, val_loss, weights, history, spearman=0.5) -> RunResult:
    for record in history:
        record["job_wildcards"]["run"] = run_id
    final = {"epoch": 2, "val_loss": val_loss, "history": history, "segments": [],
             "weights_sha256": checkpoint.weights_digest({"w": weights})}
    return RunResult(run_id=run_id, variant=variant, swept={"seed": seed}, seed_group="lr=0.003",
                     evaluations=[final], finetune={"spearman": spearman})


def twins(shifts: list[float], same_weights=False, distributed_hardware=(GPU, GPU), job_chunks=None) -> list[RunResult]:
    """One run per shift: baseline val loss 1 + 0.1 seed on the CPU, distributed = baseline + shift."""
    results = []
    for seed, shift in enumerate(shifts):
        weights = torch.full((2,), float(seed))
        results.append(result(f"r{seed}", "baseline", seed, 1.0 + 0.1 * seed, weights, epochs("baseline", [CPU, CPU])))
        results.append(result(f"r{seed}", "distributed", seed, 1.0 + 0.1 * seed + shift, weights if same_weights else weights + 1,
                              epochs("distributed", list(distributed_hardware), job_chunks)))
    return results


def study(results, metric="val_loss") -> dict:
    checks = provenance_checks(results, PLAN, jobs=None)
    return next(row for row in equivalence_rows(results, checks, MARGINS) if row["metric"] == metric)


def summary(results) -> list[dict]:
    return summary_rows(results, provenance_checks(results, PLAN, jobs=None))


def test_bitwise_equal_twins_are_identical():
    results = twins([0.0], same_weights=True, distributed_hardware=(CPU, CPU))
    (row,) = summary(results)
    assert (row["verdict"], row["bitwise"], row["hardware:distributed"]) == ("identical (bitwise)", "yes", "cpu fp32 2.13.0")
    assert study(results)["verdict"] == "identical (every delta 0)"


def test_twins_that_differ_on_the_same_hardware_are_a_resume_bug():
    (row,) = summary(twins([0.001], distributed_hardware=(CPU, CPU)))
    assert row["verdict"] == "ERROR: differs from its twin on the same hardware (cpu fp32 2.13.0): a resume bug"


def test_a_run_mixing_precisions_is_labelled():
    results = twins([0.01], distributed_hardware=(CPU, GPU))
    (row,) = summary(results)
    assert row["hardware:distributed"] == "MIXED: cpu fp32 2.13.0 + NVIDIA H100 bf16-autocast 2.13.0"
    assert row["verdict"].startswith("differs (other hardware")
    assert study(results)["mixed_hardware_runs"] == 1


def test_paired_deltas_inside_the_margin_are_equivalent():
    row = study(twins([0.01, -0.01, 0.0, 0.012, -0.005]))
    assert row["verdict"] == "equivalent (90% CI inside +-0.05)"
    assert row["ci_low"] < row["mean_delta"] < row["ci_high"] and row["tost_p"] < 0.05
    assert row["pairs"] == 5 and row["deltas"].split()[0] == "+0.01"


def test_a_systematic_shift_is_not_equivalent():
    row = study(twins([0.07, 0.08, 0.06, 0.09]))
    assert row["verdict"] == "not equivalent (90% CI [+0.0598, +0.0902] beyond the margin +-0.05)"
    assert row["ci_low"] > 0.05


def test_too_few_seeds_says_how_many_the_margin_needs():
    row = study(twins([0.04, -0.04, 0.0]))
    assert row["verdict"].startswith(f"insufficient seeds (3; about {row['seeds_needed']} needed at SD 0.04: 90% CI")
    assert row["seeds_needed"] > 3


def test_retrained_epochs_are_a_provenance_error_never_identical():
    """Epoch 1 trained in chunk 2's job (a job that retrained the chunk before it)."""
    results = twins([0.0], same_weights=True, distributed_hardware=(CPU, CPU), job_chunks={1: 2})
    (row,) = summary(results)
    assert row["verdict"] == "ERROR: provenance of distributed (see provenance.tsv)"
    assert row["provenance:distributed"] == "ERROR" and row["provenance:baseline"] == "ok"
    assert study(results)["verdict"] == "ERROR: provenance check failed for 1 of 1 runs (see provenance.tsv)"


def test_epoch_time_per_site():
    rows = per_site_rows(twins([0.0, 0.0], same_weights=True))
    assert [(row["variant"], row["site"], row["epochs"], row["mean_epoch_s"]) for row in rows] == [
        ("baseline", "a", 4, 2.0), ("distributed", "a", 4, 2.0)]


@pytest.mark.parametrize("metric", ["spearman"])
def test_a_metric_missing_in_a_run_leaves_that_pair_out(metric):
    results = twins([0.0, 0.0, 0.0], same_weights=True)
    results[1] = RunResult(**{**results[1].__dict__, "finetune": {"spearman": None}})
    assert study(results, metric)["pairs"] == 2


def test_spearman_against_training_set_size_over_the_pinned_runs():
    results = twins([0.0, 0.0], same_weights=True)
    for r, (a, b) in zip(results, [(0.2, 0.4), (0.9, 0.9), (0.3, 0.5), (0.9, 0.9)]):  # baseline, distributed, ...
        r.finetune["sweep"] = [{"method": "pretrained", "n_train": 16, "replicate": 0, "spearman": a},
                               {"method": "ridge", "n_train": 16, "replicate": 0, "spearman": b}]
    rows = finetune_size_rows(results)
    assert [(row["method"], row["n_train"], row["fits"], row["mean_spearman"]) for row in rows] == [
        ("pretrained", 16, 2, pytest.approx(0.25)), ("ridge", 16, 2, pytest.approx(0.45))]
    assert rows[0]["ci95_low"] < 0.25 < rows[0]["ci95_high"]
    # paired on the same draws: pretrained - ridge = -0.2, -0.2 (no spread: no CI)
    assert rows[1]["pretrained_minus_mean"] == pytest.approx(-0.2) and rows[1]["pretrained_minus_ci95_low"] is None
    results[0].finetune["sweep"][0]["spearman"] = 0.3  # now -0.1 and -0.2: two draws, a wide CI
    ridge = finetune_size_rows(results)[1]
    assert ridge["pretrained_minus_mean"] == pytest.approx(-0.15)
    assert ridge["pretrained_minus_ci95_low"] < -0.15 < ridge["pretrained_minus_ci95_high"] < 0.6


def test_sizes_whose_fits_have_no_spearman_are_kept_and_counted():
    results = twins([0.0], same_weights=True)
    results[0].finetune["sweep"] = [{"method": "pretrained", "n_train": 8, "replicate": 0, "spearman": None}]
    assert [(row["n_train"], row["fits"], row["mean_spearman"]) for row in finetune_size_rows(results)] == [(8, 0, None)]


def test_the_paired_difference_averages_each_runs_replicates_first():
    """Runs, not fits, are independent (every run fine-tunes on the same draws): pretrained - ridge of
    0.25 and 0.75 in one run and 0.5 and 0.5 in another is 0.5 in both runs, with no spread."""
    results = twins([0.0, 0.0], same_weights=True)
    for r, deltas in zip(results[::2], [(0.25, 0.75), (0.5, 0.5)]):
        r.finetune["sweep"] = [row for replicate, delta in enumerate(deltas) for row in (
            {"method": "pretrained", "n_train": 16, "replicate": replicate, "spearman": delta},
            {"method": "ridge", "n_train": 16, "replicate": replicate, "spearman": 0.0})]
    ridge = finetune_size_rows(results)[1]
    assert ridge["fits"] == 4 and ridge["pretrained_minus_mean"] == 0.5
    assert ridge["pretrained_minus_ci95_low"] is None  # per fit, deltas of 0.25-0.75 would have a CI
