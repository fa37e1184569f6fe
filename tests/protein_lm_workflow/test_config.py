"""Bad config is refused with the key named, both by the function and through the snakemake CLI."""
import copy
import re

import pytest
import yaml

from protein_lm.config import ConfigError, validate_config

from .conftest import WORKFLOW, snakemake

SCHEMA = WORKFLOW / "config" / "schema.yaml"


@pytest.fixture
def config() -> dict:
    return yaml.safe_load((WORKFLOW / "config" / "config.yaml").read_text())


def test_shipped_config_is_valid(config):
    validate_config(config, SCHEMA, "config.yaml")


@pytest.mark.parametrize("edit, key, detail", [
    (lambda c: c["train"].update(lr=-1), "train.lr", "less than or equal to the minimum"),
    (lambda c: c["train"].update(lrr=0.1), "train", "'lrr' was unexpected"),
    (lambda c: c["sweep"].update(learning_rate={"list": [1]}), "sweep", "'learning_rate' is not one of"),
    (lambda c: c["data"].update(synthetic_protein_lengths=[120, 2]), "data.synthetic_protein_lengths.1", "less than the minimum of 5"),
    (lambda c: c["sweep"].update(lr={"list": []}), "sweep.lr", "is not valid under any of the given schemas"),
    (lambda c: c.update(checkpoint_store="s3"), "checkpoint_store", "'s3' is not one of"),
    (lambda c: c["pretrain"].pop("chunks"), "pretrain", "'chunks' is a required property"),
])
def test_schema_error_names_the_key(config, edit, key, detail):
    bad = copy.deepcopy(config)
    edit(bad)
    with pytest.raises(ConfigError) as error:
        validate_config(bad, SCHEMA, "my.yaml")
    message = str(error.value)
    assert message.startswith(f"my.yaml: config key '{key}':")
    assert detail in message and "config/schema.yaml" in message


def test_snakemake_cli_reports_the_bad_key(tmp_path):
    result = snakemake(tmp_path, "-n", "--config", "checkpoint_store=s3")
    assert result.returncode != 0
    assert "config key 'checkpoint_store': 's3' is not one of ['local', 'osdf']" in result.stdout


def test_indivisible_heads_are_refused_with_the_run_named(tmp_path):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"sweep": {"n_heads": {"list": [2, 3]}}}))
    result = snakemake(tmp_path, "-n", "--configfile", str(tmp_path / "bad.yaml"))
    assert result.returncode != 0
    assert "d_model 32 must be divisible by n_heads 3" in result.stdout


def test_a_protein_shorter_than_the_library_stops_the_workflow_before_it_runs(tmp_path):
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"data": {"synthetic_protein_lengths": [120, 10]}}))
    result = snakemake(tmp_path, "-n", "--configfile", str(tmp_path / "bad.yaml"))
    assert result.returncode != 0
    assert "data.synthetic_protein_lengths [10] are shorter than data.library_sites 24; lengthen them" in result.stdout


def test_an_unknown_resume_bug_is_refused_naming_the_ones_there_are(tmp_path):
    result = snakemake(tmp_path, "-n", "--config", "inject_resume_bug=fresh-optimizer")
    assert result.returncode != 0
    assert ("config key 'inject_resume_bug': 'fresh-optimizer' is no injectable resume bug; choose one of "
            "optimizer-moments, schedule-restart, data-order-reset, epoch-skipped") in result.stdout


def test_an_injected_bug_changes_the_training_command_and_so_the_checkpoint_names(tmp_path):
    """A negative control never meets a clean run's (immutable) checkpoint objects."""
    origin = ("--storage-osdf-backend", "local", "--storage-osdf-local-origin", str(tmp_path))
    sets = [set(re.findall(r"/set-([0-9a-f]+)/", snakemake(tmp_path, "-n", *origin, "--config", "checkpoint_store=osdf", *extra).stdout))
            for extra in ((), ("inject_resume_bug=schedule-restart",))]
    assert all(len(found) == 1 for found in sets) and sets[0] != sets[1]
