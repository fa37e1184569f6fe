"""Runs of an experiment: the cartesian product of its vars, with stable uuids and seeds."""
import sys

import pytest

from .conftest import WORKFLOW

sys.path.insert(0, str(WORKFLOW / "scripts"))
from chunked_training.experiment import load  # noqa: E402
from chunked_training.variables import VarsError  # noqa: E402

CHUNKING = {"epochs": {"type": "value", "value": 6}, "epochs_per_job": {"type": "value", "value": 2}}


def experiment(**specs):
    return load("test", {"name": "t", "vars": CHUNKING | specs})


def test_cartesian_product_of_value_list_and_range_with_mldag_defaults():
    runs = list(experiment(lr={"type": "list", "value": [0.1, "1e-3"]}, layers={"type": "range", "stop": 3},
                           optimizer={"type": "value", "value": "adamw"}).runs.values())
    assert [(r.vars["lr"], r.vars["layers"]) for r in runs] == [(lr, n) for lr in (0.1, "1e-3") for n in (0, 1, 2)]
    assert all(r.vars["optimizer"] == "adamw" and r.vars["epochs"] == 6 for r in runs)


def test_run_uuids_are_stable_and_independent_of_other_runs():
    one = experiment(lr={"type": "list", "value": [0.001]})
    two = experiment(lr={"type": "list", "value": [0.003, 0.001]})
    assert set(one.runs) < set(two.runs)
    assert experiment(lr={"type": "list", "value": [0.001]}).runs == one.runs


def test_run_uuid_is_pinned_across_releases():
    """Checkpoints are named by run uuid: a changed uuid would orphan every stored checkpoint."""
    (run,) = experiment(lr={"type": "value", "value": 0.001}).runs.values()
    assert (run.uuid, run.seed) == ("b28d31ec", 516507)


def test_each_run_its_own_seed():
    runs = experiment(lr={"type": "list", "value": [0.001, 0.002, 0.003]}).runs.values()
    assert len({run.seed for run in runs}) == 3


def test_chunk_vars_are_mldags():
    exp = experiment(alpha={"type": "range", "start": 2, "stop": 3})
    (run,) = exp.runs.values()
    assert exp.chunk_vars(run, 1) == {"epoch": 2, "run_uuid": run.uuid, "random_seed": run.seed, "run_number": 0,
                                      "epochs": 6, "epochs_per_job": 2, "alpha": 2}
    assert exp.chunk_vars(run, 3)["epoch"] == 6 and exp.chunk_vars(run, 2)["continue_from_checkpoint"] == "true"


@pytest.mark.parametrize("specs, words", [
    ({"lr": {"type": "range", "start": 0.1, "stop": 1}}, "vars.lr.start: 0.1 is not a whole number"),
    ({"lr": {"type": "range", "start": 3, "stop": 3}}, "range(3, 3, 1) is empty"),
    ({"lr": {"type": "list", "value": []}}, "non-empty list"),
    ({"lr": {"type": "list", "value": [1, 1]}}, "repeats a value"),
    ({"lr": {"type": "values", "value": 1}}, "`type: value`, `type: list` or `type: range`"),
    ({"lr": {"type": "value", "value": 1, "stop": 3}}, "type value does not take stop"),
    ({"lr": {"type": "value", "value": "1\nexecutable = /bin/evil"}}, "control character"),
    ({"lr": {"type": "value", "value": [1, 2]}}, "not a number or a string"),
    ({"run_uuid": {"type": "value", "value": 1}}, "vars.run_uuid is set by the workflow"),
    ({"epochs": {"type": "list", "value": [6, 8]}}, "vars.epochs must be one whole number"),
    ({"epochs_per_job": {"type": "value", "value": 4}}, "not a multiple of vars.epochs_per_job"),
])
def test_bad_vars_are_refused_naming_the_var(specs, words):
    with pytest.raises(VarsError, match=None) as error:
        experiment(**specs)
    assert words in str(error.value)
