"""The study's verdict rules on synthetic paired deltas: what the data say, never "add seeds" when
the mean is already beyond the margin, and seeds-needed numbers that are enough."""
import numpy as np
import pytest

from chunked_training.equivalence import (
    BEYOND, EQUIVALENT, FAILING, INSUFFICIENT, NOT_EQUIVALENT, equivalence, failed_checks, outcome,
)

MARGIN, ALPHA, POWER = 0.02, 0.05, 0.8


def judge(deltas: list[float]) -> dict:
    """The study of treatment = 1 + delta against control = 1 (the control's level does not matter)."""
    return equivalence([1.0 + d for d in deltas], [1.0] * len(deltas), MARGIN, ALPHA, POWER)


def repeated(pattern: list[float], n: int) -> list[float]:
    """n deltas cycling through `pattern` (same mean and about the same SD, more seeds)."""
    return [pattern[i % len(pattern)] for i in range(n)]


def test_every_delta_zero_is_identical():
    assert judge([0.0, 0.0, 0.0])["verdict"] == "identical (every delta 0)"


def test_a_ci_inside_the_margin_is_equivalent():
    row = judge([0.004, -0.003, 0.001, 0.002, -0.001])
    assert row["verdict"] == "equivalent (90% CI inside +-0.02)"
    assert -MARGIN < row["ci_low"] < row["ci_high"] < MARGIN and row["tost_p"] < ALPHA


def test_a_ci_wholly_beyond_the_margin_is_not_equivalent():
    row = judge([0.07, 0.08, 0.06, 0.09, 0.075])
    assert row["verdict"].startswith("not equivalent (90% CI [+0.0")
    assert row["verdict"].endswith("beyond the margin +-0.02)") and row["ci_low"] > MARGIN


def test_the_fresh_optimizer_case_two_seeds_with_the_mean_beyond_the_margin_is_named_not_add_seeds():
    """The issue's case: mean +0.068 over 2 seeds, margin 0.02: the CI reaches inside the margin."""
    row = judge([0.03, 0.106])
    assert outcome(row["verdict"]) == BEYOND and outcome(row["verdict"]) in FAILING
    assert row["verdict"].startswith("beyond the margin (mean +0.068, margin 0.02; n too small to confirm: 90% CI [")
    assert f"2 seeds, about {row['seeds_needed']} to confirm at SD 0.0537)" in row["verdict"]
    # that many seeds of the same spread confirm it
    assert outcome(judge(repeated([0.03, 0.106], row["seeds_needed"]))["verdict"]) == NOT_EQUIVALENT


def test_a_mean_inside_the_margin_whose_ci_straddles_it_is_insufficient_seeds_with_enough_seeds_named():
    pattern = [0.03, -0.03, 0.0]
    row = judge(pattern)
    assert row["verdict"] == f"insufficient seeds (3; about {row['seeds_needed']} needed at SD 0.03: 90% CI [-0.0506, +0.0506] straddles +-0.02)"
    assert outcome(judge(repeated(pattern, row["seeds_needed"]))["verdict"]) == EQUIVALENT


def test_an_inconclusive_study_says_when_its_ci_excludes_zero():
    row = judge([0.012, 0.018, 0.006, 0.02])
    assert outcome(row["verdict"]) == INSUFFICIENT and row["verdict"].endswith("straddles +-0.02; the CI excludes 0)")


def test_one_pair_has_no_spread():
    assert judge([0.01])["verdict"] == "insufficient seeds (1 pair: no spread; 2 or more needed)"
    assert judge([-0.05])["verdict"] == "beyond the margin (delta -0.05, margin 0.02; n too small to confirm: 1 pair: no spread; 2 or more needed)"


def test_equal_deltas_are_judged_by_their_value():
    assert outcome(judge([0.01, 0.01])["verdict"]) == EQUIVALENT
    assert outcome(judge([0.03, 0.03])["verdict"]) == NOT_EQUIVALENT


@pytest.mark.parametrize("seed", range(5))
def test_insufficient_seeds_only_when_the_ci_straddles_the_margin_and_the_mean_is_inside(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        n = int(rng.integers(2, 8))
        row = judge(list(rng.normal(rng.uniform(-0.06, 0.06), rng.uniform(0.001, 0.05), n)))
        kind = outcome(row["verdict"])
        if abs(row["mean_delta"]) >= MARGIN:
            assert kind in (NOT_EQUIVALENT, BEYOND), row
        if kind == INSUFFICIENT:
            assert row["ci_low"] < MARGIN < row["ci_high"] or row["ci_low"] < -MARGIN < row["ci_high"], row
        if kind == NOT_EQUIVALENT:
            assert row["ci_low"] > MARGIN or row["ci_high"] < -MARGIN, row


def test_failed_checks_name_the_run_and_the_check():
    summary = [{"run": "1a2b3c4d", "verdict": "ERROR: differs from its twin on the same hardware (cpu fp32 2.13.0): a resume bug"},
               {"run": "5e6f7a8b", "verdict": "identical (bitwise)"},
               {"run": "9c0d1e2f", "verdict": "differs (other hardware or precision: judged by the study)"}]
    study = [{"group": "all", "metric": "val_loss", "verdict": judge([0.03, 0.106])["verdict"]},
             {"group": "all", "metric": "spearman", "verdict": judge([0.03, -0.03, 0.0])["verdict"]}]
    reasons = failed_checks(summary, study, allow_not_equivalent=False)
    assert reasons == ["run 1a2b3c4d: twin check: ERROR: differs from its twin on the same hardware (cpu fp32 2.13.0): a resume bug",
                       f"seed group all, val_loss: study: {study[0]['verdict']}"]
    # a study of real differences may finish; a bug on the same hardware never does
    assert failed_checks(summary, study, allow_not_equivalent=True) == reasons[:1]
    assert failed_checks(summary[1:], study[1:], allow_not_equivalent=False) == []
