"""Validation of a pretraining checkpoint and fine-tuning on the experimental set."""

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy import stats
from torch.nn import functional as F

from . import checkpoint
from .config import TrainParams
from .data import SCORE_TERMS, load_splits
from .runtime import autocast, configure
from .training import build_model, seed_everything, train_step


@torch.no_grad()
def predict(model: torch.nn.Module, tokens: np.ndarray, device: torch.device, batch_size: int = 256) -> np.ndarray:
    model.eval()
    outputs = []
    for start in range(0, len(tokens), batch_size):
        with autocast(device):
            outputs.append(model(torch.from_numpy(tokens[start:start + batch_size]).to(device)).float().cpu())
    return torch.cat(outputs).numpy()


def correlation(method, x: np.ndarray, y: np.ndarray) -> float | None:
    """None when undefined (a constant prediction), rather than a NaN in the JSON."""
    value = float(method(x, y).statistic)
    return None if math.isnan(value) else value


def load_pretrained(path: Path, device: torch.device) -> tuple[dict, torch.nn.Module]:
    state = checkpoint.load(path)
    model = build_model(TrainParams.from_dict(state["params"]), len(SCORE_TERMS), device)
    model.load_state_dict(state["model"])
    return state, model


def evaluate_checkpoint(path: Path, data: Path, threads: int) -> dict:
    """Validation loss and per-term Pearson r of checkpoint k on the simulated validation split."""
    device = configure(threads)
    state, model = load_pretrained(path, device)
    val = load_splits(data, SCORE_TERMS)["val"]
    prediction = predict(model, val.tokens, device)
    return {
        "run": state["run_id"],
        "chunk": state["chunk"],
        "epoch": state["position"]["epoch"],
        "train_loss": state["history"][-1]["train_loss"],
        "val_loss": float(np.mean((prediction - val.targets) ** 2)),
        "pearson": {term: correlation(stats.pearsonr, prediction[:, i], val.targets[:, i]) for i, term in enumerate(SCORE_TERMS)},
    }


@dataclass(frozen=True)
class FinetuneConfig:
    epochs: int
    lr: float
    batch_size: int


def finetune(pretrained: Path, experimental: Path, cfg: FinetuneConfig, threads: int) -> dict:
    """METL's second stage: the pretrained encoder, a fresh one-output head, the small
    experimental training split; Spearman rho on the held-out experimental split."""
    device = configure(threads)
    state, model = load_pretrained(pretrained, device)
    params = TrainParams.from_dict(state["params"])
    seed_everything(params.seed)
    model.replace_head(1)
    model.to(device)
    splits = load_splits(experimental, ("score",))
    train, test = splits["train"], splits["test"]
    tokens, targets = torch.from_numpy(train.tokens), torch.from_numpy(train.targets)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=params.weight_decay)
    model.train()
    for _ in range(cfg.epochs):
        order = torch.randperm(len(tokens))
        for start in range(0, len(tokens), cfg.batch_size):
            batch = order[start:start + cfg.batch_size]
            train_step(model, optimizer, tokens[batch], targets[batch], device, params.grad_clip)
    prediction = predict(model, test.tokens, device)[:, 0]
    return {
        "run": state["run_id"],
        "pretrained_epochs": state["position"]["epoch"],
        "finetune_epochs": cfg.epochs,
        "n_train": len(train.tokens),
        "n_test": len(test.tokens),
        "test_mse": float(F.mse_loss(torch.from_numpy(prediction), torch.from_numpy(test.targets[:, 0]))),
        "spearman": correlation(stats.spearmanr, prediction, test.targets[:, 0]),
    }
