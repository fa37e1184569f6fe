"""Validation of a pretraining checkpoint; predictions and correlations that fine-tuning shares."""

import math
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from . import checkpoint
from .config import TrainParams
from .data import SCORE_TERMS, Proteins, Split, load_splits
from .runtime import autocast, configure
from .training import build_model, inputs


@torch.no_grad()
def predict(model: torch.nn.Module, split: Split, device: torch.device, batch_size: int = 256) -> np.ndarray:
    model.eval()
    outputs = []
    for start in range(0, len(split), batch_size):
        with autocast(device):
            x = inputs(split, slice(start, start + batch_size))
            outputs.append(model(*(part.to(device) for part in x)).float().cpu())
    return torch.cat(outputs).numpy()


def correlation(method, x: np.ndarray, y: np.ndarray) -> float | None:
    """None when undefined (a constant prediction), rather than a NaN in the JSON."""
    value = float(method(x, y).statistic)
    return None if math.isnan(value) else value


def load_pretrained(path: Path, proteins: Proteins, device: torch.device) -> tuple[dict, torch.nn.Module]:
    state = checkpoint.load(path)
    model = build_model(TrainParams.from_dict(state["params"]), proteins, len(SCORE_TERMS), device)
    model.load_state_dict(state["model"])
    return state, model


def evaluate_checkpoint(path: Path, data: Path, threads: int) -> dict:
    """Validation loss and per-term Pearson r of checkpoint k on the simulated validation split,
    with what the comparison needs of the checkpoint (its history and segments, a digest of its
    weights), so that compare reads no checkpoint."""
    device = configure(threads)
    val = load_splits(data)["val"]
    state, model = load_pretrained(path, val.proteins, device)
    prediction = predict(model, val, device)
    return {
        "run": state["run_id"],
        "chunk": state["chunk"],
        "epoch": state["position"]["epoch"],
        "train_loss": state["history"][-1]["train_loss"],
        "val_loss": float(np.mean((prediction - val.targets) ** 2)),
        "pearson": {term: correlation(stats.pearsonr, prediction[:, i], val.targets[:, i]) for i, term in enumerate(SCORE_TERMS)},
        "weights_sha256": checkpoint.weights_digest(state["model"]),
        "history": state["history"],
        "segments": state["segments"],
    }
