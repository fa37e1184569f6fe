"""Chunking cost: one run trained in N chunks (N processes, each resuming from the previous
chunk's checkpoint) vs in one job, at equal epochs, on the workflow's demo model.

Both go through the workflow's training entry point (protein_lm.training.train_chunk) in
fresh processes (bench/chunk_job.py), with the workflow's config (config/config.yaml: data,
train) and one thread, sequentially. Reported: wall time of each, the ratio, where each
process's time goes, and the fixed cost of one extra chunk, from which the chunk length
that keeps the ratio <= 1.05 follows.
"""
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from .common import PYTHON, REPO, BenchError, header, load, spread

WORKFLOW = REPO / "workflows" / "protein_lm"
PACKAGE_DIR = WORKFLOW / "scripts"
PHASES = ("startup", "imports", "configure", "data", "model", "ckpt load", "ckpt save", "training", "exit")
GOAL = 1.05


def add_arguments(parser) -> None:
    group = parser.add_argument_group("chunking")
    group.add_argument("--chunking-epochs", type=int, default=2, metavar="E", help="epochs of the run (default 2)")
    group.add_argument("--chunking-chunks", type=int, default=2, metavar="N",
                       help="chunks the run is split into (default 2; must divide E)")
    group.add_argument("--chunking-variants", type=int, default=None, metavar="V",
                       help="training variants in the synthetic data (default: config.yaml's data.n_variants); "
                            "more variants = longer epochs")


def run(args) -> None:
    epochs, chunks = args.chunking_epochs, args.chunking_chunks
    if epochs % chunks:
        raise SystemExit(f"--chunking-epochs {epochs} is not a multiple of --chunking-chunks {chunks}")
    config = yaml.safe_load((WORKFLOW / "config" / "config.yaml").read_text())
    if args.chunking_variants:
        config["data"]["n_variants"] = args.chunking_variants
    header(f"chunking: {epochs} epochs in {chunks} chunks vs one job, "
           f"{config['data']['n_variants']} variants, {args.repeat} repeats")
    walls = {"one job": [], f"{chunks} chunks": []}
    phases = {name: {phase: [] for phase in PHASES} for name in walls}
    fixed = []  # per process: everything but training, what each extra chunk pays again
    with tempfile.TemporaryDirectory(prefix="htcannex-bench-") as scratch:
        scratch = Path(scratch)
        data = _make_data(config, scratch)
        params = {**config["train"], "seed": 1}
        for repeat in range(args.repeat):
            for name, n in (("one job", 1), (f"{chunks} chunks", chunks)):
                started = time.perf_counter()
                for job in _chain(scratch / f"{repeat}-{n}", data, params, epochs, n):
                    for phase, seconds in job.items():
                        phases[name][phase].append(seconds)
                    fixed.append(sum(seconds for phase, seconds in job.items() if phase != "training"))
                walls[name].append(time.perf_counter() - started)
                print(f"   repeat {repeat + 1} {name:10} {walls[name][-1]:7.1f} s  ({load()})", flush=True)
    one, split = (statistics.median(values) for values in walls.values())
    ratio = split / one
    print("   wall time, median [min-max] of repeats:")
    for name, values in walls.items():
        print(f"     {name:10} {spread(values):>22} s")
    print(f"   ratio {ratio:.3f} (goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'} at this chunk length, "
          f"{one / chunks:.1f} s of training per chunk)")
    print("   per process, median s:  " + " ".join(f"{phase:>9.9}" for phase in PHASES))
    for name, by_phase in phases.items():
        print(f"     {name:21}" + " ".join(f"{statistics.median(by_phase[phase] or [0]):9.3f}" for phase in PHASES))
    extra = (split - one) / (chunks - 1) if chunks > 1 else 0.0
    per_process = statistics.median(fixed)
    print(f"   one extra chunk costs {extra:.2f} s of wall time (difference of the medians); a process spends "
          f"{per_process:.2f} s outside training (median): chunks of >= {per_process / (GOAL - 1):.0f} s "
          f"of training keep the ratio <= {GOAL}")


def _make_data(config: dict, scratch: Path) -> Path:
    sys.path.insert(0, str(PACKAGE_DIR))
    from protein_lm.data import DataConfig, generate

    simulated = scratch / "simulated.tsv"
    generate(DataConfig(**config["data"]), simulated, scratch / "experimental.tsv", scratch / "metadata.json")
    return simulated


def _chain(workdir: Path, data: Path, params: dict, epochs: int, chunks: int):
    """Train the run in `chunks` processes; yields each process's phase times."""
    workdir.mkdir(parents=True)
    previous = None
    for chunk in range(1, chunks + 1):
        output = workdir / f"chunk{chunk}.pt"
        spec = {"package_dir": str(PACKAGE_DIR), "params": params, "data": str(data), "chunk": chunk,
                "epochs_per_job": epochs // chunks, "total_epochs": epochs,
                "previous": str(previous) if previous else None, "output": str(output), "threads": 1}
        spawned = time.time()
        done = subprocess.run([PYTHON, "-m", "bench.chunk_job", repr(spawned), json.dumps(spec)],
                              cwd=REPO, capture_output=True, text=True)
        wall = time.time() - spawned
        if done.returncode != 0:
            raise BenchError(f"chunk {chunk} of {chunks} failed:\n{done.stderr[-3000:]}")
        phases = json.loads(done.stdout.strip().splitlines()[-1])
        yield {**phases, "exit": wall - sum(phases.values())}
        previous = output
