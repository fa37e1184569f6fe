"""What every benchmark needs: the machine it ran on, timed child processes, medians.

Every benchmark prints its numbers side by side from one run, so a ratio compares two
measurements taken under the same load; the load (`uptime`) is printed with each result
because this machine is shared.
"""
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# The snakemake of this venv, run as the user runs it (its console script).
SNAKEMAKE = str(Path(PYTHON).parent / "snakemake")


def machine() -> str:
    """nproc, memory and CPU model, as docs/benchmarks.md records them."""
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor() or "unknown CPU",
    )
    memory_gib = psutil.virtual_memory().total / 2**30
    return f"{os.cpu_count()} CPUs ({model}), {memory_gib:.1f} GiB, Python {platform.python_version()}"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


@dataclass
class Timed:
    wall_s: float
    peak_rss_mib: float  # the largest resident set of the child or any descendant it waited for
    cpu_s: float         # user + system CPU of the child and its waited-for descendants
    output: str
    cpu_parts: dict[str, float] | None = None  # cpu_s by process, where a benchmark splits it


def met(ok: bool) -> str:
    """How every benchmark says whether its goal is met."""
    return "met" if ok else "NOT met"


class BenchError(RuntimeError):
    """A measured command failed: the numbers would mean nothing."""


def run_timed(argv: list[str], cwd: Path, env: dict | None = None, umask: int = -1) -> Timed:
    """Run a command to completion; wall time, peak RSS and CPU from its own rusage (os.wait4),
    not from RUSAGE_CHILDREN, which mixes in every earlier child of this process. `umask`: the
    command's, if not -1 (this process's)."""
    started = time.perf_counter()
    with open(cwd / ".bench-output.txt", "w+") as sink:
        child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT, umask=umask)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        sink.seek(0)
        output = sink.read()
    if child.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited {child.returncode} in {cwd}:\n{output[-3000:]}")
    # ru_maxrss is in KiB on Linux.
    return Timed(wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, output)


def spread(values) -> str:
    """median [min-max] of repeated measurements."""
    values = list(values)
    return f"{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]"


def own_cpu_s() -> float:
    """CPU seconds of this process so far (user + system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def header(title: str) -> None:
    print(f"\n== {title}\n   machine: {machine()}\n   {load()}", flush=True)


def bench_env() -> dict:
    """The environment for measured commands: this venv first on PATH (jobs run its snakemake)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"
    return env
