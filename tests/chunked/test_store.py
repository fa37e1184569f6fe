"""The checkpoint store (rules/store.smk) as a user's config meets it."""
from pathlib import Path

import pytest
import yaml

from .conftest import BIN, PROFILE, pool_env, run, toy_config


def test_an_osdf_training_file_without_the_osdf_store_names_the_setting_to_change(user_project):
    config = toy_config(checkpoint_store="local")
    config["training"]["files"] = ["train.sh", "osdf:///htcannex/data.npz"]
    (user_project / "config.yaml").write_text(yaml.safe_dump(config))
    result = run([str(BIN / "snakemake"), "-n"], user_project, None)
    assert result.returncode != 0
    assert ("osdf:///htcannex/data.npz is an OSDF object, but checkpoint_store is 'local': set checkpoint_store: osdf"
            in result.stdout + result.stderr), result.stdout[-3000:] + result.stderr[-3000:]


def sidecar_config(sidecars):
    config = toy_config(checkpoint_store="osdf", baseline="none")
    config["vars"]["lr"]["value"] = [0.1]
    config["training"]["command"] += " && echo metrics > {write_to}.metrics.csv"
    config["training"]["sidecars"] = sidecars
    return config


@pytest.mark.slow
def test_the_osdf_store_moves_the_commands_sidecars_with_each_checkpoint(user_project, embedded_pool):
    (user_project / "config.yaml").write_text(yaml.safe_dump(sidecar_config([".metrics.csv"])))
    result = run([str(BIN / "snakemake"), "--executor", "htcannex", "--profile", str(PROFILE)], user_project,
                 pool_env(embedded_pool))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    objects = embedded_pool.origin_dir / "htcannex" / "chunked_training" / "toy"
    checkpoints = sorted(objects.glob("set-*/distributed/*/*.txt"))
    assert len(checkpoints) == 3  # 6 epochs in chunks of 2
    for checkpoint in checkpoints:
        assert Path(f"{checkpoint}.metrics.csv").read_text() == "metrics\n"


def test_the_osdf_store_refuses_a_sidecar_it_writes_itself(user_project):
    (user_project / "config.yaml").write_text(yaml.safe_dump(sidecar_config([".sha256"])))
    result = run([str(BIN / "snakemake"), "-n"], user_project, None)
    assert result.returncode != 0
    assert "training.sidecars lists .sha256, which the osdf store writes for every object itself" in result.stdout + result.stderr
