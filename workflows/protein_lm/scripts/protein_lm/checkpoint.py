"""Checkpoint files that refuse to load when damaged, and the RNG states they carry.

Every checkpoint has a ``NAME.sha256`` sidecar written by the osdf storage plugin's integrity
helper, the same one the plugin checks when it moves checkpoints through OSDF. torch.load
does not notice a flipped byte inside a tensor (it loads garbage), and a chunk that silently
started from garbage or from scratch would invalidate the whole run, so loading verifies
first and raises CheckpointError naming the file.
"""

import hashlib
import os
import random
from pathlib import Path

import numpy as np
import torch
from snakemake_interface_common.exceptions import WorkflowError
from snakemake_storage_plugin_osdf import integrity


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, damaged, or belongs to another run."""


def save(state: dict, path: Path) -> None:
    """Write the file atomically, then its sidecar: an eviction mid-save leaves a file without
    a matching sidecar, which load() refuses, never half a checkpoint that loads."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    integrity.sidecar_of(path).unlink(missing_ok=True)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)
    integrity.write_with_checksum(path)


def load(path: Path) -> dict:
    """The verified checkpoint with every tensor on the CPU, whatever device saved it: a chunk
    trained on a GPU site resumes on a CPU-only one (load_state_dict then moves weights and
    optimizer state to the model's device)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} does not exist; rerun the chunk that writes it")
    try:
        integrity.verify(path)
    except WorkflowError as error:  # corrupt, never committed (no sidecar), unreadable sidecar
        raise CheckpointError(f"refusing to resume from {path}: {error}") from error
    return torch.load(path, map_location="cpu", weights_only=True)


def weights_digest(weights: dict) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes: equal digests mean bitwise-equal
    weights, so the comparison needs no checkpoint, only this (evaluate_chunk writes it)."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        tensor = weights[name].detach().cpu().contiguous().reshape(-1)
        digest.update(f"{name} {tensor.dtype} {tuple(weights[name].shape)}\n".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def remove(path: Path) -> None:
    path = Path(path)
    path.unlink(missing_ok=True)
    integrity.sidecar_of(path).unlink(missing_ok=True)


def capture_rng() -> dict:
    """Every RNG a training step can draw from (dropout, shuffles, any library code)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": random.getstate(),
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": pos, "has_gauss": has_gauss, "cached": cached},
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }


def restore_rng(rng: dict) -> None:
    """Restore what the saved states cover on this machine. A hop may change the device or the
    GPU count: each GPU here gets its saved state where there is one; a GPU without one (the
    chunk before ran on the CPU or on fewer GPUs) gets a seed derived from the saved CPU state,
    so the stream is still a function of the run, not of the clock. Bitwise equality across such
    a hop is impossible anyway (docs/protein_lm.md, "GPU-safe resume")."""
    random.setstate(rng["python"])
    n = rng["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
    torch.set_rng_state(rng["torch"].cpu())
    if not torch.cuda.is_available():
        return
    saved = list(rng["cuda"])
    fallback = int.from_bytes(hashlib.sha256(rng["torch"].cpu().numpy().tobytes()).digest()[:8], "big")
    for index in range(torch.cuda.device_count()):
        if index < len(saved):
            torch.cuda.set_rng_state(saved[index].cpu(), index)
        else:
            torch.cuda.default_generators[index].manual_seed(fallback + index)
