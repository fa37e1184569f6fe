"""Sweep variables fan out to runs with stable ids and distinct seeds."""
import pytest

from protein_lm.config import ConfigError
from protein_lm.sweep import expand_sweep, seed_group

from .conftest import TINY_TRAIN

PINNED_ID = "cbc41434-667e-5d9f-b1ee-62c2146fa686"


def test_cartesian_product_of_value_list_and_range():
    runs = expand_sweep(TINY_TRAIN, {
        "lr": {"list": [0.001, 0.003]},
        "d_model": {"range": {"start": 16, "stop": 64, "step": 16}},
        "dropout": {"value": 0.2},
    })
    assert len(runs) == 6
    assert {(r.params["lr"], r.params["d_model"]) for r in runs} == {(lr, d) for lr in (0.001, 0.003) for d in (16, 32, 48)}
    assert all(r.params["dropout"] == 0.2 and r.params["n_layers"] == TINY_TRAIN["n_layers"] for r in runs)
    assert runs[0].swept == {"d_model": 16, "dropout": 0.2, "lr": 0.001}


def test_float_range_excludes_stop():
    runs = expand_sweep(TINY_TRAIN, {"lr": {"range": {"start": 0.001, "stop": 0.004, "step": 0.001}}})
    assert [r.params["lr"] for r in runs] == [0.001, 0.002, 0.003]


def test_run_ids_are_stable_and_independent_of_other_runs():
    one = expand_sweep(TINY_TRAIN, {"lr": {"list": [0.001]}})
    two = expand_sweep(TINY_TRAIN, {"lr": {"list": [0.003, 0.001]}})
    assert one[0].id == next(r.id for r in two if r.params["lr"] == 0.001)
    assert expand_sweep(TINY_TRAIN, {"lr": {"list": [0.001]}})[0] == one[0]


def test_run_id_is_pinned_across_releases():
    """Checkpoints are named by run id: a changed id would orphan every stored checkpoint."""
    [run] = expand_sweep({"lr": 0.001, "d_model": 32}, {"seed": {"value": 1}})
    assert run.id == PINNED_ID


def test_seeds_distinct_unless_swept():
    runs = expand_sweep(TINY_TRAIN, {"lr": {"list": [0.001, 0.002, 0.003]}})
    assert len({r.params["seed"] for r in runs}) == 3
    seeded = expand_sweep(TINY_TRAIN, {"seed": {"list": [1, 2, 3]}})
    assert [r.params["seed"] for r in seeded] == [1, 2, 3]
    assert len({seed_group(r) for r in seeded}) == 1  # differ only in seed: one group


def test_empty_range_names_the_variable():
    with pytest.raises(ConfigError, match=r"sweep\.lr\.range.*gives no values"):
        expand_sweep(TINY_TRAIN, {"lr": {"range": {"start": 0.01, "stop": 0.001, "step": 0.001}}})
