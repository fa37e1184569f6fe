"""Chunking cost: one run trained in N chunks (N processes, each resuming from the previous
chunk's checkpoint) vs in one job, at equal epochs, on the workflow's demo model.

Each process is what a train_chunk job's training command is (bench/chunk_job.py): the
workflow's scripts/train_chunk.py with chunked_training's arguments, and the workflow's config
(config/config.yaml: data, train, pretrain.checkpoint_every_steps) and one thread, run
sequentially. Reported: wall and CPU time of each, their ratios, where each process's time
goes, and the fixed cost of one extra chunk. --chunking-seconds T sizes the data so that a
chunk trains about T s, to measure the ratio at a realistic chunk length side by side.
"""
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from .common import PYTHON, REPO, BenchError, header, load, met, run_timed, spread

WORKFLOW = REPO / "workflows" / "protein_lm"
PACKAGE_DIR = WORKFLOW / "scripts"
SCRIPT = PACKAGE_DIR / "train_chunk.py"
PHASES = ("startup", "imports", "configure", "data", "model", "ckpt load", "ckpt save", "training", "exit")
GOAL = 1.05
FIXED_CPU_GOAL_S = 3.0  # the goal for protein_lm's fixed cost per extra chunk


def add_arguments(parser) -> None:
    group = parser.add_argument_group("chunking", "sizes of the chunking and chunking-e2e benchmarks")
    group.add_argument("--chunking-epochs", type=int, default=2, metavar="E", help="epochs of the run (default 2)")
    group.add_argument("--chunking-chunks", type=int, default=2, metavar="N",
                       help="chunks the run is split into (default 2; must divide E)")
    group.add_argument("--chunking-variants", type=int, default=None, metavar="V",
                       help="training variants in the synthetic data (default: config.yaml's data.n_variants); "
                            "more variants = longer epochs")
    group.add_argument("--chunking-seconds", type=float, default=None, metavar="T",
                       help="size the data so that one chunk trains about T s (calibrated by timing one "
                            "1-epoch chunk at config.yaml's size); replaces --chunking-variants")


def run(args) -> None:
    epochs, chunks = args.chunking_epochs, args.chunking_chunks
    with tempfile.TemporaryDirectory(prefix="htcannex-bench-") as scratch:
        scratch = Path(scratch)
        config = sized_config(args, scratch)
        params = {**config["train"], "seed": 1}
        every_steps = config["pretrain"]["checkpoint_every_steps"]
        data = _make_data(config, scratch)
        header(f"chunking: {epochs} epochs in {chunks} chunks vs one job, "
               f"{config['data']['n_variants']} variants, {args.repeat} repeats")
        walls = {"one job": [], f"{chunks} chunks": []}
        cpus = {name: [] for name in walls}
        phases = {name: {phase: [] for phase in PHASES} for name in walls}
        phases_cpu = {name: {phase: [] for phase in PHASES} for name in walls}
        fixed = []  # per process: everything but training, what each extra chunk pays again (wall s)
        fixed_cpu = []  # the same in CPU seconds
        for repeat in range(args.repeat):
            for name, n in (("one job", 1), (f"{chunks} chunks", chunks)):
                started, cpu = time.perf_counter(), 0.0
                for job, job_cpu in _chain(scratch / f"{repeat}-{n}", data, params, every_steps, epochs, n):
                    for by_phase, measured in ((phases[name], job), (phases_cpu[name], job_cpu)):
                        for phase, seconds in measured.items():
                            by_phase[phase].append(seconds)
                    fixed.append(sum(seconds for phase, seconds in job.items() if phase != "training"))
                    fixed_cpu.append(sum(seconds for phase, seconds in job_cpu.items() if phase != "training"))
                    cpu += sum(job_cpu.values())
                walls[name].append(time.perf_counter() - started)
                cpus[name].append(cpu)
                print(f"   repeat {repeat + 1} {name:10} {walls[name][-1]:7.1f} s wall {cpu:7.1f} s CPU  ({load()})",
                      flush=True)
    one, split = (statistics.median(values) for values in walls.values())
    cpu_ratio = statistics.median(cpus[f"{chunks} chunks"]) / statistics.median(cpus["one job"])
    print("   median [min-max] of repeats:     wall s                  CPU s")
    for name in walls:
        print(f"     {name:10} {spread(walls[name]):>22} {spread(cpus[name]):>22}")
    print_ratio(walls, statistics.median(phases[f"{chunks} chunks"]["training"]), f", {cpu_ratio:.3f} CPU")
    print("   per process, median s:  " + " ".join(f"{phase:>9.9}" for phase in PHASES))
    for clock, measured in (("wall", phases), ("CPU", phases_cpu)):
        for name, by_phase in measured.items():
            print(f"     {name:10} {clock:>4}      " + " ".join(f"{statistics.median(by_phase[phase] or [0]):9.3f}"
                                                             for phase in PHASES))
    extra = (split - one) / (chunks - 1) if chunks > 1 else 0.0
    extra_cpu = (statistics.median(cpus[f"{chunks} chunks"]) - statistics.median(cpus["one job"])) / max(chunks - 1, 1)
    per_process, per_process_cpu = statistics.median(fixed), statistics.median(fixed_cpu)
    print(f"   one extra chunk costs {extra:.2f} s of wall time and {extra_cpu:.2f} s of CPU (differences of the "
          f"medians); a process spends {per_process:.2f} s of wall time [{min(fixed):.2f}-{max(fixed):.2f}] and "
          f"{per_process_cpu:.2f} s of CPU [{min(fixed_cpu):.2f}-{max(fixed_cpu):.2f}] outside training (median "
          f"[min-max]): chunks of >= {per_process / (GOAL - 1):.0f} s of training (wall; "
          f"{per_process_cpu / (GOAL - 1):.0f} s of CPU) keep the ratio <= {GOAL}")
    print(f"   goal <= {FIXED_CPU_GOAL_S:g} s of CPU per extra chunk (outside training, median): "
          f"{met(per_process_cpu <= FIXED_CPU_GOAL_S)}")


def print_ratio(walls: dict, training_s: float, also: str = "") -> None:
    """The ratio of the medians against the goal, of the fastest repeats, and whether the repeats'
    own spread (other load) leaves the goal's 5% measurable at all."""
    one, split = walls.values()
    ratio = statistics.median(split) / statistics.median(one)
    fastest = min(split) / min(one)
    print(f"   ratio {ratio:.3f} wall{also}, {fastest:.3f} wall of the fastest repeats (least slowed by other load); "
          f"goal <= {GOAL}: {met(ratio <= GOAL)} at {training_s:.1f} s of training per chunk")
    widest = max(max(values) / min(values) for values in walls.values()) - 1
    if widest > GOAL - 1:
        print(f"   (repeats of one variant differ by up to {widest:.0%}, more than the {GOAL - 1:.0%} the goal allows: "
              "at this load the ratio cannot tell)")


def sized_config(args, scratch: Path) -> dict:
    """config.yaml with the data sized by --chunking-variants or --chunking-seconds (calibrated in
    scratch); puts the workflow's package (protein_lm) on sys.path for the callers."""
    epochs, chunks = args.chunking_epochs, args.chunking_chunks
    if epochs % chunks:
        raise SystemExit(f"--chunking-epochs {epochs} is not a multiple of --chunking-chunks {chunks}")
    config = yaml.safe_load((WORKFLOW / "config" / "config.yaml").read_text())
    if args.chunking_variants:
        config["data"]["n_variants"] = args.chunking_variants
    sys.path.insert(0, str(PACKAGE_DIR))
    if args.chunking_seconds:
        config["data"]["n_variants"] = _variants_for(args.chunking_seconds, epochs // chunks, config, scratch)
    return config


def _variants_for(seconds: float, epochs_per_chunk: int, config: dict, scratch: Path) -> int:
    """Training variants for a chunk of about `seconds`: an epoch's time grows with the data, so
    one 1-epoch chunk at config.yaml's size gives the rate."""
    data = _make_data(config, scratch / "calibration")
    params = {**config["train"], "seed": 1}
    (job, _), = _chain(scratch / "calibration" / "run", data, params, 0, 1, 1)
    variants = round(config["data"]["n_variants"] * seconds / (job["training"] * epochs_per_chunk))
    print(f"   calibration: 1 epoch of {config['data']['n_variants']} variants trained in {job['training']:.2f} s: "
          f"{variants} variants for {seconds:g} s per chunk of {epochs_per_chunk} epoch(s)", flush=True)
    return variants


def _make_data(config: dict, directory: Path) -> Path:
    from protein_lm.data import DataConfig, generate

    simulated = directory / "simulated.npz"
    generate(DataConfig(**config["data"]), simulated, directory / "experimental.npz", directory / "metadata.json")
    return simulated


def _chain(workdir: Path, data: Path, params: dict, every_steps: int, epochs: int, chunks: int):
    """Train the run in `chunks` processes; yields each process's phase times, wall and CPU seconds."""
    from protein_lm.job_environment import SELF_CHECKPOINT_MODE_VARIABLE

    workdir.mkdir(parents=True)
    previous = None
    for chunk in range(1, chunks + 1):
        output = workdir / f"chunk{chunk}.pt"
        argv = _command(data, params, every_steps, chunk, epochs // chunks, epochs, previous, output)
        spec = {"search_path": [str(PACKAGE_DIR)], "argv": argv, "script": str(SCRIPT)}
        # As under the local executor: no job ad, so self-checkpoints are saved and training goes on.
        env = {**os.environ, "PYTHONPATH": str(REPO), SELF_CHECKPOINT_MODE_VARIABLE: "continue"}
        spawned = time.time()
        try:
            done = run_timed([PYTHON, "-m", "bench.chunk_job", repr(spawned), json.dumps(spec)], cwd=workdir, env=env)
        except BenchError as error:
            raise BenchError(f"chunk {chunk} of {chunks} failed: {error}") from None
        timed = json.loads(done.output.strip().splitlines()[-1])
        phases, cpu = timed["phases"], timed["cpu"]
        yield ({**phases, "exit": done.wall_s - sum(phases.values())},
               {**cpu, "exit": done.cpu_s - sum(cpu.values())})
        previous = output


def _command(data, params, every_steps, chunk, epochs_per_job, total_epochs, previous, output) -> list[str]:
    """The training command's arguments for one chunk, as chunked_training fills them in."""
    return ["--run", "bench", "--chunk", str(chunk), "--epochs-per-job", str(epochs_per_job),
            "--total-epochs", str(total_epochs), "--data", str(data), "--resume-from", str(previous or ""),
            "--write-to", str(output), "--self-checkpoint", f"selfckpt-{chunk}.pt",
            "--checkpoint-every-steps", str(every_steps), "--threads", "1",
            "--params", *(f"{name}={value}" for name, value in params.items())]
