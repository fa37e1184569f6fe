"""The checkpoint store (rules/store.smk) as a user's config meets it."""
from pathlib import Path

import pytest
import yaml

from .conftest import BIN, PROFILE, WORKFLOW, pool_env, run, toy_config


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
    # .sha256 is the osdf store's own checksum sidecar, which it moves with every object itself.
    (user_project / "config.yaml").write_text(yaml.safe_dump(sidecar_config([".metrics.csv", ".sha256"])))
    result = run([str(BIN / "snakemake"), "--executor", "htcannex", "--profile", str(PROFILE)], user_project,
                 pool_env(embedded_pool))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    objects = embedded_pool.origin_dir / "htcannex" / "chunked_training" / "toy"
    checkpoints = sorted(objects.glob("set-*/distributed/*/*.txt"))
    assert len(checkpoints) == 3  # 6 epochs in chunks of 2
    for checkpoint in checkpoints:
        assert Path(f"{checkpoint}.metrics.csv").read_text() == "metrics\n"
        assert Path(f"{checkpoint}.sha256").exists()


def test_a_profiles_config_does_not_override_the_module_users_own(user_project):
    # profiles/local's `config: {checkpoint_store: osdf}` is Snakemake's --config, which overrides configfiles;
    # the module user's own checkpoint_store: local (without any osdf setting) must stay.
    config = toy_config(checkpoint_store="local")
    del config["osdf_prefix"]
    (user_project / "config.yaml").write_text(yaml.safe_dump(config))
    result = run([str(BIN / "snakemake"), "-n", "--executor", "htcannex", "--profile", str(PROFILE)], user_project, None)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "results/toy/checkpoints/distributed/" in output and "osdf://" not in output


def test_the_profiles_config_still_overrides_the_workflows_defaults(tmp_path):
    # Run with -s and no config of the user's: profiles/local's checkpoint_store: osdf wins over config/config.yaml.
    result = run([str(BIN / "snakemake"), "-n", "--executor", "htcannex", "--profile", str(PROFILE),
                  "-s", str(WORKFLOW / "Snakefile")], tmp_path, None)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "osdf:///htcannex/chunked_training/toy/" in output
