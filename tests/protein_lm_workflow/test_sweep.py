"""protein_lm's sweep variables become values (runs are chunked_training's: tests/chunked_training)."""
import pytest

from protein_lm.config import ConfigError
from protein_lm.sweep import expand_variable


def test_value_list_and_int_range():
    assert expand_variable("dropout", {"value": 0.2}) == [0.2]
    assert expand_variable("lr", {"list": [0.001, 0.003]}) == [0.001, 0.003]
    assert expand_variable("d_model", {"range": {"start": 16, "stop": 64, "step": 16}}) == [16, 32, 48]


def test_float_range_excludes_stop():
    assert expand_variable("lr", {"range": {"start": 0.001, "stop": 0.004, "step": 0.001}}) == [0.001, 0.002, 0.003]


def test_empty_range_names_the_variable():
    with pytest.raises(ConfigError, match=r"sweep\.lr\.range.*gives no values"):
        expand_variable("lr", {"range": {"start": 0.01, "stop": 0.001, "step": 0.001}})
