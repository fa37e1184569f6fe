"""The checkpoint store (rules/store.smk) as a user's config meets it."""
import yaml

from .conftest import BIN, run, toy_config


def test_an_osdf_training_file_without_the_osdf_store_names_the_setting_to_change(user_project):
    config = toy_config(checkpoint_store="local")
    config["training"]["files"] = ["train.sh", "osdf:///htcannex/data.npz"]
    (user_project / "config.yaml").write_text(yaml.safe_dump(config))
    result = run([str(BIN / "snakemake"), "-n"], user_project, None)
    assert result.returncode != 0
    assert ("osdf:///htcannex/data.npz is an OSDF object, but checkpoint_store is 'local': set checkpoint_store: osdf"
            in result.stdout + result.stderr), result.stdout[-3000:] + result.stderr[-3000:]
