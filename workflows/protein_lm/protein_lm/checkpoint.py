"""Checkpoint files that refuse to load when damaged, and the RNG states they carry.

A checkpoint is a torch-serialised dict behind a one-line header with the SHA-256 of the
payload. torch.load does not notice a flipped byte inside a tensor (it loads garbage), and a
chunk that silently started from garbage or from scratch would invalidate the whole run, so a
mismatch raises CheckpointError naming the file.
"""

import hashlib
import io
import os
import random
from pathlib import Path

import numpy as np
import torch

MAGIC = b"protein_lm-checkpoint sha256="


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, damaged, or belongs to another run."""


def save(state: dict, path: Path) -> None:
    """Write atomically: an eviction mid-write leaves the previous file, never half a file."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as handle:
        handle.write(MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


def load(path: Path) -> dict:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CheckpointError(f"cannot read checkpoint {path}: {error}") from error
    header, _, payload = data.partition(b"\n")
    if not header.startswith(MAGIC):
        raise CheckpointError(f"{path} is not a protein_lm checkpoint (no checksum header); delete it and rerun the chunk that writes it")
    if hashlib.sha256(payload).hexdigest().encode() != header[len(MAGIC):]:
        raise CheckpointError(f"checkpoint {path} is corrupt (SHA-256 mismatch); delete it and rerun the chunk that writes it")
    return torch.load(io.BytesIO(payload), weights_only=True)


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
    random.setstate(rng["python"])
    n = rng["numpy"]
    np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
    torch.set_rng_state(rng["torch"])
    if rng["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
