"""The equivalence verdict of distributed runs against their pinned twins."""
import torch

from protein_lm.compare import RunResult, per_site_rows, summary_rows


def result(run_id: str, variant: str, seed: int, val_loss: float, weights: torch.Tensor, site: str) -> RunResult:
    history = [{"epoch": 1, "chunk": 1, "train_loss": 1.0, "wall_s": 2.0, "site": site}]
    return RunResult(
        run_id=run_id, variant=variant, swept={"seed": seed}, seed_group="lr=0.003",
        state={"model": {"w": weights}, "history": history, "segments": []},
        evaluations=[{"epoch": 1, "val_loss": val_loss}], finetune={"spearman": 0.5},
    )


def twins(n_seeds: int, distributed_shift: float, same_weights: bool) -> list[RunResult]:
    results = []
    for seed in range(n_seeds):
        baseline_loss = 1.0 + 0.1 * seed  # seed-to-seed SD 0.1 (n=3: exactly 0.1)
        weights = torch.full((2,), float(seed))
        results.append(result(f"r{seed}", "baseline", seed, baseline_loss, weights, "expanse"))
        results.append(result(f"r{seed}", "distributed", seed, baseline_loss + distributed_shift,
                              weights if same_weights else weights + 1, "delta"))
    return results


def test_bitwise_equal_twins_are_identical_whatever_the_seeds():
    rows = summary_rows(twins(1, 0.0, same_weights=True), equivalence_k=2.0, min_seeds=3)
    assert rows[0]["val_loss:verdict"] == "identical (bitwise)"


def test_too_few_seeds_is_said():
    rows = summary_rows(twins(2, 0.01, same_weights=False), equivalence_k=2.0, min_seeds=3)
    assert {row["val_loss:verdict"] for row in rows} == {"insufficient seeds (2 < 3)"}


def test_delta_judged_against_seed_spread():
    within = summary_rows(twins(3, 0.15, same_weights=False), equivalence_k=2.0, min_seeds=3)
    assert {row["val_loss:verdict"] for row in within} == {"equivalent"}  # 0.15 <= 2 x 0.1
    beyond = summary_rows(twins(3, 0.25, same_weights=False), equivalence_k=2.0, min_seeds=3)
    assert {row["val_loss:verdict"] for row in beyond} == {"differs (|delta| > 2 x SD 0.1)"}
    assert beyond[0]["val_loss:delta"] == 0.25 and beyond[0]["sites:distributed"] == "delta"


def test_epoch_time_per_site():
    rows = per_site_rows(twins(2, 0.0, same_weights=True))
    assert [(row["variant"], row["site"], row["epochs"], row["mean_epoch_s"]) for row in rows] == [
        ("baseline", "expanse", 2, 2.0), ("distributed", "delta", 2, 2.0)]
