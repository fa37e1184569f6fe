"""Chunked pretraining: one call trains epochs of one chunk and leaves checkpoint k.

A chunk resumes exactly where the previous one stopped: model, optimizer, LR schedule, every
RNG state, the data sampler's position. Within a chunk a resumable file is saved every
``every_steps`` steps; under HTCondor the job then stops (and exits with the checkpoint exit
code) so that an eviction loses at most that many steps. Splitting a run into chunks, or
stopping and resuming it, gives bitwise the same weights as training it in one go.
"""

import dataclasses
import enum
import logging
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from . import checkpoint
from .checkpoint import CheckpointError
from .config import TrainParams
from .data import Proteins, Split, load_splits
from .model import ModelConfig, ProteinRegressor
from .runtime import autocast, configure, hardware
from .job_environment import current_host, provenance

log = logging.getLogger(__name__)

# The equivalence study's negative controls (docs/protein_lm.md, "The study"): each is
# one realistic resume bug, injected only by a test or by hand, that fires where a chunk resumes
# from checkpoint k-1 (a hop), never where it restarts from its own self-checkpoint. The chunk's
# segment records it.
RESUME_BUGS = {
    "optimizer-moments": "AdamW re-created at the hop (moments and step counts lost); the LR schedule kept",
    "schedule-restart": "the LR schedule restarted from warmup at the hop; the optimizer kept",
    "data-order-reset": "the data order re-seeded at the hop (the next epoch repeats epoch 1's order)",
    "epoch-skipped": "the resumed epoch counter one ahead: one epoch per hop never trained",
}


@dataclass(frozen=True)
class SelfCheckpoint:
    path: Path          # in the job's working directory, so HTCondor can transfer it back
    every_steps: int    # 0: never
    stop_after_save: bool  # True under HTCondor (the job exits); False: keep training
    every_minutes: float = 0.0  # 0: never; else also save once this much training time has passed

    def due(self, steps: int, since_save_s: float) -> bool:
        """A save is due after `steps` steps of this segment, `since_save_s` after the last save
        (or the segment's start). Minutes suit real sites (a save costs a job restart); steps
        suit tests. Resuming is bitwise either way, wherever the save falls."""
        by_steps = self.every_steps > 0 and steps % self.every_steps == 0
        return by_steps or (self.every_minutes > 0 and since_save_s >= 60 * self.every_minutes)


@dataclass(frozen=True)
class ChunkJob:
    run_id: str
    params: TrainParams
    data: Path
    chunk: int                 # 1-based; chunk k writes checkpoint k
    epochs_per_job: int
    total_epochs: int
    previous: Path | None      # checkpoint k-1; None for chunk 1
    output: Path
    self_checkpoint: SelfCheckpoint
    threads: int
    resume_bug: str | None = None  # a negative control (RESUME_BUGS); None: the code as it is

    def __post_init__(self):
        if self.resume_bug not in (None, *RESUME_BUGS):
            raise ValueError(f"resume bug {self.resume_bug!r}: choose one of {', '.join(RESUME_BUGS)}")


class Outcome(enum.Enum):
    FINISHED = "finished"          # checkpoint k written
    CHECKPOINTED = "checkpointed"  # resumable file saved, job should stop and be restarted


def build_model(params: TrainParams, proteins: Proteins, n_outputs: int, device: torch.device) -> ProteinRegressor:
    cfg = ModelConfig(
        proteins=proteins, n_outputs=n_outputs, d_model=params.d_model, n_layers=params.n_layers,
        n_heads=params.n_heads, max_relative_distance=params.max_relative_distance, dropout=params.dropout,
    )
    return ProteinRegressor(cfg).to(device)


def warmup_cosine(total_steps: int, warmup_fraction: float):
    warmup = max(1, int(total_steps * warmup_fraction))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def initial_state(job: ChunkJob) -> dict:
    """Where chunk 1 starts: seeded RNGs, sampler at epoch 0 step 0."""
    seed_everything(job.params.seed)
    return {
        "position": {"epoch": 0, "step": 0, "sampler": torch.Generator().manual_seed(job.params.seed).get_state()},
        "rng": checkpoint.capture_rng(),
        "history": [],
        "partial_epoch": None,
        "segments": [],
    }


def read_state(job: ChunkJob) -> dict:
    """The resumable file of this chunk if an earlier attempt left one, else checkpoint k-1."""
    own = job.self_checkpoint.path
    if own.exists():
        state = checkpoint.load(own)
        expect_chunk, source = job.chunk, own
        log.info("resuming chunk %d from its self-checkpoint %s", job.chunk, own)
    elif job.previous is not None:
        state = checkpoint.load(job.previous)
        expect_chunk, source = job.chunk - 1, job.previous
    else:
        return initial_state(job)
    if state["run_id"] != job.run_id or state["chunk"] != expect_chunk:
        raise CheckpointError(
            f"{source} belongs to run {state['run_id']} chunk {state['chunk']}, not run {job.run_id} chunk {expect_chunk}; delete it"
        )
    if state["params"] != dataclasses.asdict(job.params):
        raise CheckpointError(f"{source} was trained with other parameters {state['params']}; delete it or restore the config")
    return state


def inputs(split: Split, rows) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's inputs for some rows of a split: sequences and protein indices."""
    return tuple(torch.from_numpy(array) for array in split.batch(rows))


def train_step(model, optimizer, x: tuple[torch.Tensor, torch.Tensor], y: torch.Tensor, device: torch.device, grad_clip: float) -> float:
    """One optimizer step on a batch (`inputs`); returns the batch's mean squared error."""
    with autocast(device):
        prediction = model(*(part.to(device) for part in x))
    loss = F.mse_loss(prediction.float(), y.to(device))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


def train_chunk(job: ChunkJob) -> Outcome:
    device = configure(job.threads)
    train = load_splits(job.data)["train"]
    targets = torch.from_numpy(train.targets)
    batch_size = job.params.batch_size
    steps_per_epoch = math.ceil(len(train) / batch_size)
    end_epoch = min(job.chunk * job.epochs_per_job, job.total_epochs)

    state = read_state(job)
    model = build_model(job.params, train.proteins, targets.shape[1], device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=job.params.lr, weight_decay=job.params.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(steps_per_epoch * job.total_epochs, job.params.warmup_fraction)
    )
    # A hop: this chunk starts from checkpoint k-1 (not from its own self-checkpoint).
    bug = job.resume_bug if "model" in state and state["chunk"] != job.chunk else None
    position = state["position"]
    if "model" in state:
        model.load_state_dict(state["model"])
        if bug != "optimizer-moments":
            optimizer.load_state_dict(state["optimizer"])
        if bug != "schedule-restart":
            scheduler.load_state_dict(state["scheduler"])
    if bug == "data-order-reset":
        position = position | {"sampler": torch.Generator().manual_seed(job.params.seed).get_state()}
    elif bug == "epoch-skipped":
        position = position | {"epoch": position["epoch"] + 1}

    # Where and how this chunk trains, for every epoch it finishes (provenance;
    # precision per chunk, so a comparison can tell a run that mixed devices).
    where = provenance() | {"host": current_host()} | hardware(device)
    segment = {"chunk": job.chunk, **where, "started": time.time(), "steps": 0}
    if bug:
        segment["injected_resume_bug"] = bug
    rng = state["rng"]
    partial = state["partial_epoch"] or {"loss_sum": 0.0, "samples": 0, "wall_s": 0.0}
    sampler = torch.Generator()
    last_save = time.monotonic()

    def snapshot(position: dict, partial: dict | None) -> dict:
        return {
            "run_id": job.run_id, "params": dataclasses.asdict(job.params), "chunk": job.chunk,
            "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "position": position, "rng": checkpoint.capture_rng(), "partial_epoch": partial,
            "history": state["history"], "segments": state["segments"] + [dict(segment, finished=time.time())],
        }

    model.train()
    while position["epoch"] < end_epoch:
        epoch = position["epoch"]
        # The sampler's state is the one at the start of this epoch, so a resumed epoch
        # draws the same order; every other RNG is restored just before the first batch.
        sampler.set_state(position["sampler"])
        order = torch.randperm(len(train), generator=sampler)
        checkpoint.restore_rng(rng)
        epoch_started, due = time.perf_counter(), False
        for step in range(position["step"], steps_per_epoch):
            batch = order[step * batch_size:(step + 1) * batch_size]
            loss = train_step(model, optimizer, inputs(train, batch.numpy()), targets[batch], device, job.params.grad_clip)
            scheduler.step()
            partial["loss_sum"] += loss * len(batch)
            partial["samples"] += len(batch)
            segment["steps"] += 1
            due = job.self_checkpoint.due(segment["steps"], time.monotonic() - last_save)
            if due and step + 1 < steps_per_epoch:
                last_save = time.monotonic()
                wall = partial["wall_s"] + time.perf_counter() - epoch_started
                here = {"epoch": epoch, "step": step + 1, "sampler": position["sampler"]}
                checkpoint.save(snapshot(here, dict(partial, wall_s=wall)), job.self_checkpoint.path)
                log.info("self-checkpoint at epoch %d step %d", epoch + 1, step + 1)
                if job.self_checkpoint.stop_after_save:
                    return Outcome.CHECKPOINTED
        state["history"].append({
            "epoch": epoch + 1, "chunk": job.chunk, "train_loss": partial["loss_sum"] / partial["samples"],
            "wall_s": partial["wall_s"] + time.perf_counter() - epoch_started, **where, "finished": time.time(),
        })
        log.info("epoch %(epoch)d (chunk %(chunk)d) on %(site)s: train loss %(train_loss).4f, %(wall_s).1f s", state["history"][-1])
        position = {"epoch": epoch + 1, "step": 0, "sampler": sampler.get_state()}
        partial = {"loss_sum": 0.0, "samples": 0, "wall_s": 0.0}
        rng = checkpoint.capture_rng()
        if due and position["epoch"] < end_epoch:
            last_save = time.monotonic()
            checkpoint.save(snapshot(position, None), job.self_checkpoint.path)
            if job.self_checkpoint.stop_after_save:
                return Outcome.CHECKPOINTED

    checkpoint.save(snapshot(position, None), job.output)
    checkpoint.remove(job.self_checkpoint.path)
    return Outcome.FINISHED
