"""Device, precision, threads and determinism for every torch entry point."""

import contextlib
import gc
import os
import platform
from pathlib import Path

import torch


def configure(threads: int) -> torch.device:
    """Use the rule's threads and deterministic kernels; return the GPU when there is one. Ends
    the script's start-up (`end_start_up`).

    Bitwise-reproducible chunking needs deterministic kernels; on CUDA that also needs cuBLAS's
    fixed workspace, which must be set before CUDA initialises.
    """
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.set_num_threads(threads)
    # Imports torch._inductor's config and with it torch._dynamo (which every torch.optim
    # optimizer imports on its first call anyway): the last of the start-up's imports.
    torch.use_deterministic_algorithms(True)
    end_start_up()
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def end_start_up() -> None:
    """Resume garbage collection if the script paused it for its start-up (`gc.disable()` as its
    first line, before it imports torch); in-process callers (tests) never pause it.

    Importing torch and torch._dynamo makes ~450,000 objects that stay for the whole process;
    collecting while they pile up ran ~680 collections, 0.5-0.6 s of CPU per process, for
    nothing. Frozen (gc.freeze), they are out of every later collection's sight, training's too.
    """
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def precision(device: torch.device) -> str:
    """bf16 autocast on GPUs (Ampere and later run it natively); full fp32 on CPU."""
    return "bf16-autocast" if device.type == "cuda" else "fp32"


def autocast(device: torch.device):
    if precision(device) == "bf16-autocast":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def hardware(device: torch.device) -> dict:
    """What a chunk ran on, recorded per chunk: twins are bitwise comparable only when every
    chunk of both ran on the same kind of device, at the same precision, with the same torch."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({cpu_model()})"
    # str(): a TorchVersion is not among the types a weights_only load accepts.
    return {"device": name, "precision": precision(device), "torch": str(torch.__version__)}


def cpu_model() -> str:
    """The CPU's model name (Linux), else its architecture: sites with other CPUs may take other
    vectorised code paths, so equal weights are expected only on the same model."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine() or "unknown"


def skip_exit_collections() -> None:
    """Call last in a script that imported torch: its interpreter exit then takes ~0.2 s, not ~1.4 s.

    At exit Python runs full garbage collections over every tracked object, ~280,000 once torch
    and torch._dynamo (which any torch.optim optimizer imports) are loaded. Freezing moves them
    out of the collector's sight; the process frees its memory as it ends anyway, and atexit
    handlers (logging's flush) still run.
    """
    gc.freeze()
