"""METL's fine-tuning protocol, and the baselines it must beat.

As METL trains its target models (gitter-lab/metl, `args/finetune_avgfp_local.txt`: a linear
top net after dropout 0.5 on the backbone, backbone frozen for the first half of the epochs,
then unfrozen with the LR aligned, AdamW with weight decay 0.1, gradient clipping 0.5, a
warmup-constant then cosine-decay schedule whose second phase runs at 0.1 x the LR, a
validation split): the pretrained backbone, dropout and a fresh linear head;
- phase 1 (`head_epochs`): the head alone, backbone frozen, LR warming up to `lr` then constant;
- phase 2 (`epochs`): everything, at `backbone_lr_ratio` x `lr`, warmup then cosine decay;
- after every epoch the validation MSE; the trained epoch with the lowest is the model kept.
Baselines on exactly the same variants, each tuned on the same validation split: the same
architecture from scratch (every weight trained from a random start, warmup then cosine decay,
at each learning rate and warmup of `scratch`, for up to its `epochs`; the setting and epoch
with the lowest validation MSE kept, as the pretrained model's pretraining settings and
fine-tuning epoch were chosen on validation) and ridge regression on one-hot residues
(statsmodels' `fit_regularized(L1_wt=0)`, the penalty chosen on the validation split).

A training-set-size sweep (`train_sizes`, `replicates`): replicate r of size n draws n variants
of the experimental training split (seeded by r and n, the same for every run), `val_fraction`
of them for validation; every model is scored by Spearman rho on the fixed test split.
"""

import copy
import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np
import torch
from scipy import stats
from statsmodels.regression.linear_model import OLS

from . import checkpoint
from .config import ConfigError, TrainParams
from .data import SCORE_TERMS, Split, load_splits
from .evaluation import correlation, predict
from .runtime import configure
from .sequence import AMINO_ACIDS
from .training import build_model, inputs, seed_everything, train_step, warmup_cosine

RIDGE_PENALTIES = tuple(10.0 ** k for k in range(-4, 2))
METHODS = ("pretrained", "scratch", "ridge")


@dataclass(frozen=True)
class FinetuneConfig:
    head_epochs: int
    epochs: int
    lr: float
    backbone_lr_ratio: float
    warmup_fraction: float
    weight_decay: float
    grad_clip: float
    dropout: float
    batch_size: int
    val_fraction: float
    train_sizes: tuple   # empty: the whole training split
    replicates: int
    baselines: bool      # also from scratch and one-hot ridge
    scratch: dict        # the from-scratch baseline's search: lr and warmup_fraction lists, epochs

    @classmethod
    def from_dict(cls, settings: dict) -> "FinetuneConfig":
        values = {f.name: settings[f.name] for f in fields(cls)}
        return cls(**values | {"train_sizes": tuple(values["train_sizes"])})


def draw(train: Split, size: int | None, replicate: int, val_fraction: float) -> tuple[Split, Split]:
    """Replicate `replicate` of `size` training variants (None: all), split into train and validation."""
    available = len(train)
    size = available if size is None else size
    if size > available:
        raise ConfigError(f"finetune.train_sizes: {size} exceeds the {available} experimental training variants; "
                          "lower it or raise data.n_experimental")
    chosen = np.random.default_rng([replicate, size]).permutation(available)[:size]
    n_val = max(1, round(size * val_fraction))
    return train.subset(chosen[n_val:]), train.subset(chosen[:n_val])


def val_mse(model, val: Split, device) -> float:
    return float(np.mean((predict(model, val, device) - val.targets) ** 2))


def fit(model, train: Split, val: Split, phases: list[tuple[int, list, float, bool]], cfg: FinetuneConfig, device) -> tuple[int, float]:
    """Train through `phases` of (epochs, parameters, lr, cosine decay); keep the weights of the
    epoch with the lowest validation MSE. Returns (that epoch, its MSE)."""
    targets = torch.from_numpy(train.targets)
    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    best = (0, math.inf, None)  # the untrained head predicts a constant: never a candidate
    epoch = 0
    for epochs, parameters, lr, decay in phases:
        if not epochs:
            continue
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        for parameter in parameters:
            parameter.requires_grad_(True)
        optimizer = torch.optim.AdamW(parameters, lr=lr, weight_decay=cfg.weight_decay)
        total = steps_per_epoch * epochs
        schedule = warmup_cosine(total, cfg.warmup_fraction) if decay else (
            lambda step, warmup=max(1, int(total * cfg.warmup_fraction)): min(1.0, (step + 1) / warmup))
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
        for _ in range(epochs):
            model.train()
            order = torch.randperm(len(train))
            for start in range(0, len(train), cfg.batch_size):
                batch = order[start:start + cfg.batch_size]
                train_step(model, optimizer, inputs(train, batch.numpy()), targets[batch], device, cfg.grad_clip)
                scheduler.step()
            epoch += 1
            mse = val_mse(model, val, device)
            if mse < best[1]:
                best = (epoch, mse, copy.deepcopy(model.state_dict()))
    model.load_state_dict(best[2])
    return best[0], best[1]


def transfer(state: dict, params: TrainParams, train: Split, val: Split, cfg: FinetuneConfig, device) -> tuple[torch.nn.Module, int, float]:
    model = build_model(params, train.proteins, len(SCORE_TERMS), device)
    model.load_state_dict(state["model"])
    model.replace_head(1, cfg.dropout)
    model.to(device)
    head = list(model.head.parameters())
    phases = [(cfg.head_epochs, head, cfg.lr, False), (cfg.epochs, list(model.parameters()), cfg.lr * cfg.backbone_lr_ratio, True)]
    return (model, *fit(model, train, val, phases, cfg, device))


def scratch(params: TrainParams, train: Split, val: Split, cfg: FinetuneConfig, device, seed: int) -> tuple[torch.nn.Module, int, float, dict]:
    """The same architecture from a random start, tuned on the validation split: every lr x
    warmup of `cfg.scratch` for up to its epochs; (model, epoch, validation MSE, setting) of the best."""
    best = None
    for lr in cfg.scratch["lr"]:
        for warmup in cfg.scratch["warmup_fraction"]:
            seed_everything(seed)
            model = build_model(params, train.proteins, 1, device)
            model.replace_head(1, cfg.dropout)
            model.to(device)
            phases = [(cfg.scratch["epochs"], list(model.parameters()), lr, True)]
            epoch, mse = fit(model, train, val, phases, replace(cfg, warmup_fraction=warmup), device)
            if best is None or mse < best[2]:
                best = (model, epoch, mse, {"lr": lr, "warmup_fraction": warmup})
    return best


def one_hot(split: Split) -> np.ndarray:
    tokens, _ = split.batch()
    return np.eye(len(AMINO_ACIDS), dtype=np.float64)[tokens].reshape(len(tokens), -1)


def ridge(train: Split, val: Split, test: Split) -> tuple[np.ndarray, float, float]:
    """Predictions on `test` of one-hot ridge, the penalty chosen on `val`; (predictions, penalty, val MSE)."""
    x, y = one_hot(train), train.targets[:, 0].astype(np.float64)
    offset = y.mean()  # fit_regularized penalises every coefficient: centre instead of an intercept
    best = None
    for penalty in RIDGE_PENALTIES:
        coefficients = OLS(y - offset, x).fit_regularized(alpha=penalty, L1_wt=0.0).params
        mse = float(np.mean((one_hot(val) @ coefficients + offset - val.targets[:, 0]) ** 2))
        if best is None or mse < best[2]:
            best = (coefficients, penalty, mse)
    return one_hot(test) @ best[0] + offset, best[1], best[2]


def finetune(pretrained: Path, experimental: Path, cfg: FinetuneConfig, threads: int) -> dict:
    """Every (size, replicate) of the sweep for the pretrained model (and the baselines when
    asked); the headline `spearman` is the pretrained model at the largest size, replicate 0."""
    device = configure(threads)
    state = checkpoint.load(pretrained)
    params = TrainParams.from_dict(state["params"])
    splits = load_splits(experimental)
    test = splits["test"]
    rows = []
    for size in sorted(cfg.train_sizes) or [None]:
        for replicate in range(cfg.replicates):
            train, val = draw(splits["train"], size, replicate, cfg.val_fraction)
            where = {"n_train": len(train) + len(val), "replicate": replicate}
            seed_everything(params.seed + replicate)
            fits = [("pretrained", *transfer(state, params, train, val, cfg, device), {})]
            if cfg.baselines:
                fits.append(("scratch", *scratch(params, train, val, cfg, device, params.seed + replicate)))
            for method, model, epoch, mse, chosen in fits:
                prediction = predict(model, test, device)[:, 0]
                rows.append(where | {"method": method, "best_epoch": epoch, "val_mse": mse, **chosen,
                                     "spearman": correlation(stats.spearmanr, prediction, test.targets[:, 0])})
            if cfg.baselines:
                prediction, penalty, mse = ridge(train, val, test)
                rows.append(where | {"method": "ridge", "best_epoch": None, "val_mse": mse, "penalty": penalty,
                                     "spearman": correlation(stats.spearmanr, prediction, test.targets[:, 0])})
    headline = [row for row in rows if row["method"] == "pretrained" and row["replicate"] == 0][-1]
    return {
        "run": state["run_id"],
        "pretrained_epochs": state["position"]["epoch"],
        "protocol": asdict(cfg),
        "n_train": headline["n_train"],
        "n_test": len(test),
        "best_epoch": headline["best_epoch"],
        "spearman": headline["spearman"],
        "sweep": rows,
    }
