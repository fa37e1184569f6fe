"""Device, precision, threads and determinism for every torch entry point."""

import contextlib
import gc
import logging
import os
import platform
import sys
from pathlib import Path
from typing import NoReturn

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


def end_process(code: int = 0) -> NoReturn:
    """End a torch script's process with exit status `code`, without the interpreter's teardown.
    Call last, once every output is written and closed.

    Python's exit frees the ~450,000 objects torch and torch._dynamo made one by one (and, unless
    they are frozen, runs full garbage collections over them): 0.2-0.25 s of CPU per process
    frozen, ~1.4 s not, for memory the operating system takes back at once anyway. What that exit
    would still do for this process is done here: flush logging's handlers (its atexit hook) and
    the standard streams. The other atexit hooks (torch 2.13: torch._dynamo's and FakeTensor's
    compile statistics, the DataLoader workers' exit flag, torch.library's deregistrations,
    multiprocessing joining its children) have nothing to do in a script that compiled nothing
    and started no worker processes.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
