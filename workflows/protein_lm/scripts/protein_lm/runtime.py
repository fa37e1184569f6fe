"""Device, precision, threads and determinism for every torch entry point."""

import contextlib
import os

import torch


def configure(threads: int) -> torch.device:
    """Use the rule's threads and deterministic kernels; return the GPU when there is one.

    Bitwise-reproducible chunking needs deterministic kernels; on CUDA that also needs cuBLAS's
    fixed workspace, which must be set before CUDA initialises.
    """
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def autocast(device: torch.device):
    """bf16 autocast on GPUs (Ampere and later run it natively); full fp32 on CPU."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()
