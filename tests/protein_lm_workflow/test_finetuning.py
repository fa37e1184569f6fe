"""METL's fine-tuning protocol: head-only phase, then everything; best epoch on validation; the size sweep."""
from dataclasses import replace

import pytest
import torch
import yaml

from protein_lm import checkpoint, finetuning
from protein_lm.config import ConfigError
from protein_lm.data import load_splits
from protein_lm.finetuning import FinetuneConfig, draw, finetune, transfer
from protein_lm.runtime import configure
from protein_lm.config import TrainParams
from protein_lm.training import train_chunk

from .conftest import WORKFLOW
from .test_training import job

TINY = FinetuneConfig.from_dict(yaml.safe_load((WORKFLOW / "config" / "config.yaml").read_text())["finetune"]
                                | {"head_epochs": 1, "epochs": 1, "batch_size": 8,
                                   "scratch": {"lr": [0.001, 0.01], "warmup_fraction": [0.1, 0.3], "epochs": 2}})


@pytest.fixture
def pretrained(tiny_data, tiny_params, tmp_path):
    train_chunk(job(tiny_data, tiny_params, tmp_path, 1, 1, "p"))
    return tmp_path / "p-1.pt"


def test_phases_and_the_best_epoch(pretrained, tiny_data, monkeypatch):
    """The head phase leaves the backbone alone, the second phase moves it, and the epoch with the
    lowest validation MSE is the one kept (validation MSEs dictated here)."""
    state = checkpoint.load(pretrained)
    params = TrainParams.from_dict(state["params"])
    train, val = draw(load_splits(tiny_data["experimental"])["train"], None, 0, 0.2)
    device = configure(1)
    backbone = [name for name in state["model"] if not name.startswith("head.")]
    unchanged = lambda model: all(torch.equal(model.state_dict()[name], state["model"][name]) for name in backbone)  # noqa: E731
    falling = iter([3.0, 2.0, 1.0])  # after epochs 1, 2, 3: the last is best
    monkeypatch.setattr("protein_lm.finetuning.val_mse", lambda *args: next(falling))
    head_only, epoch, _ = transfer(state, params, train, val, replace(TINY, head_epochs=3, epochs=0), device)
    assert epoch == 3 and unchanged(head_only)
    falling = iter([3.0, 2.0, 1.0])
    both, epoch, mse = transfer(state, params, train, val, replace(TINY, head_epochs=1, epochs=2), device)
    assert (epoch, mse) == (3, 1.0) and not unchanged(both)
    rising = iter([1.0, 2.0, 3.0])  # the backbone's epochs only made it worse: the head-only epoch is kept
    monkeypatch.setattr("protein_lm.finetuning.val_mse", lambda *args: next(rising))
    kept, epoch, _ = transfer(state, params, train, val, replace(TINY, head_epochs=1, epochs=2), device)
    assert epoch == 1 and unchanged(kept) and kept.state_dict()["head.1.weight"].any()


def test_size_sweep_with_replicates_and_baselines(pretrained, tiny_data):
    cfg = replace(TINY, train_sizes=(8, 16), replicates=2, baselines=True)
    result = finetune(pretrained, tiny_data["experimental"], cfg, 1)
    rows = [(row["method"], row["n_train"], row["replicate"]) for row in result["sweep"]]
    assert rows == [(method, size, replicate) for size in (8, 16) for replicate in (0, 1)
                    for method in ("pretrained", "scratch", "ridge")]
    assert result["n_train"] == 16 and result["spearman"] == result["sweep"][6]["spearman"]
    assert all(1 <= row["best_epoch"] <= 2 for row in result["sweep"] if row["method"] != "ridge")
    assert {row["penalty"] for row in result["sweep"] if row["method"] == "ridge"} <= {10.0 ** k for k in range(-4, 2)}
    # from scratch: the setting of the search with the lowest validation MSE, recorded
    assert all(row["lr"] in (0.001, 0.01) and row["warmup_fraction"] in (0.1, 0.3) for row in result["sweep"] if row["method"] == "scratch")


def test_the_scratch_baseline_keeps_the_setting_best_on_validation(pretrained, tiny_data, monkeypatch):
    """Validation MSEs dictated per (lr, warmup) setting: the lowest one's setting is kept."""
    def val_mse(model, val, device):  # the fit's optimizer lr tells which setting trains
        return {0.001: 2.0, 0.01: 1.0}[round(trained_lr[-1], 6)] + (0.5 if trained_warmup[-1] == 0.1 else 0.0)
    trained_lr, trained_warmup = [], []
    real_fit = finetuning.fit
    def fit(model, train, val, phases, cfg, device):
        trained_lr.append(phases[0][2])
        trained_warmup.append(cfg.warmup_fraction)
        return real_fit(model, train, val, phases, cfg, device)
    monkeypatch.setattr(finetuning, "fit", fit)
    monkeypatch.setattr(finetuning, "val_mse", val_mse)
    result = finetune(pretrained, tiny_data["experimental"], replace(TINY, train_sizes=(16,), baselines=True), 1)
    (row,) = [row for row in result["sweep"] if row["method"] == "scratch"]
    assert (row["lr"], row["warmup_fraction"], row["val_mse"]) == (0.01, 0.3, 1.0)
    assert {row["penalty"] for row in result["sweep"] if row["method"] == "ridge"} <= {10.0 ** k for k in range(-4, 2)}


def test_a_size_beyond_the_training_split_names_the_key(pretrained, tiny_data):
    with pytest.raises(ConfigError, match=r"finetune.train_sizes: 500 exceeds the 20 experimental training variants"):
        finetune(pretrained, tiny_data["experimental"], replace(TINY, train_sizes=(500,)), 1)
