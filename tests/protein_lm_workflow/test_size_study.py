"""The by-hand size study: pretrain per seed, fine-tune the sweep with baselines, compare's table."""
import json

import yaml

from protein_lm import size_study

from .conftest import TINY_DATA, TINY_TRAIN, WORKFLOW


def test_size_study_reports_each_method_and_the_paired_difference(tmp_path, capsys):
    config = yaml.safe_load((WORKFLOW / "config" / "config.yaml").read_text())
    config |= {"data": TINY_DATA, "train": TINY_TRAIN, "pretrain": config["pretrain"] | {"chunks": 1, "epochs_per_job": 1},
               "finetune": config["finetune"] | {"head_epochs": 1, "epochs": 1, "batch_size": 8,
                                                  "scratch": {"lr": [0.001, 0.01], "warmup_fraction": [0.1], "epochs": 2}}}
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(config))
    argv = ["--config", str(tmp_path / "tiny.yaml"), "--seeds", "1", "--workdir", str(tmp_path / "work"), "--sizes", "10", "--replicates", "2"]
    assert size_study.main(argv) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()][1:]
    assert [(row["method"], row["n_train"], row["fits"]) for row in rows] == [("pretrained", 10, 2), ("scratch", 10, 2), ("ridge", 10, 2)]
    assert rows[0]["pretrained_minus_mean"] is None and rows[2]["pretrained_minus_mean"] is not None
    assert sorted(p.name for p in (tmp_path / "work").glob("clean-*.pt")) == ["clean-1-chunk-1.pt"]
