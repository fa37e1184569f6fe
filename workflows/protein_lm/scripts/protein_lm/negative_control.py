"""The equivalence study's negative controls at any config size, run by hand (docs/protein_lm.md,
"The study").

For each seed: the clean chunked run (`pretrain.chunks` x `epochs_per_job`, every hop resumed
correctly; on one machine bitwise equal to the unbroken twin, tested), then, for each injected
resume bug (`training.RESUME_BUGS`), the same run resumed from the clean chunk 1 with the bug at
every hop. Each final checkpoint is evaluated (val loss) and fine-tuned (Spearman) as the
workflow does; then `compare`'s own code judges each bug against the clean runs: the twin check
run by run (same hardware, so any difference is an ERROR; provenance, so a missing epoch is one)
and the paired study alone with the config's margins (as across hardware, where no bitwise check
applies), over the config's seeds (the demo's) and over all the seeds given.
Prints one JSON object per seed and run, then one per bug, seed count and check. A run already
in the work directory is reused, so a longer list of seeds only trains the new ones.

    cd workflows/protein_lm/scripts
    python -m protein_lm.negative_control --seeds 1 2 3 4 5 --workdir /tmp/negctl
"""

import argparse
import json
from pathlib import Path

import yaml
from chunked_training.equivalence import equivalence

from .compare import METRICS, VARIANTS, Plan, RunResult, provenance_checks, summary_rows
from .config import TrainParams
from .data import DataConfig, generate
from .evaluation import evaluate_checkpoint
from .finetuning import FinetuneConfig, finetune
from .sweep import expand_variable
from .training import RESUME_BUGS, ChunkJob, SelfCheckpoint, train_chunk

CONFIG = Path(__file__).resolve().parents[2] / "config" / "config.yaml"
CLEAN = "clean"


def train(params: TrainParams, data: Path, workdir: Path, name: str, chunks: int, epochs_per_job: int, threads: int,
          bug: str | None = None, first_chunk: int = 1, start: Path | None = None) -> Path:
    """Chunks first_chunk..chunks of a run (from `start`, checkpoint first_chunk - 1), each
    written as <name>-chunk-<k>.pt; a chunk already there is kept. Returns the last."""
    previous = start
    for chunk in range(first_chunk, chunks + 1):
        output = workdir / f"{name}-chunk-{chunk}.pt"
        if not output.exists():
            train_chunk(ChunkJob(f"seed-{params.seed}", params, data, chunk, epochs_per_job, chunks * epochs_per_job, previous,
                                 output, SelfCheckpoint(workdir / f"self-{name}.pt", 0, False), threads, bug))
        previous = output
    return previous


def pretrain(config: dict, seed: int, data: Path, workdir: Path, threads: int) -> Path:
    """The clean run of `seed` (kept in `workdir`: the size study reuses it)."""
    params = TrainParams.from_dict(config["train"] | {"seed": seed})
    return train(params, data, workdir, f"{CLEAN}-{seed}", config["pretrain"]["chunks"], config["pretrain"]["epochs_per_job"], threads)


def measured(path: Path, simulated: Path, experimental: Path, tune: FinetuneConfig, threads: int, cache: Path) -> dict:
    """Evaluation and fine-tuning of one final checkpoint, cached next to it."""
    if not cache.exists():
        cache.write_text(json.dumps({"evaluation": evaluate_checkpoint(path, simulated, threads),
                                     "finetune": finetune(path, experimental, tune, threads)}))
    return json.loads(cache.read_text())


def judge(clean: dict, buggy: dict, seeds: list[int], config: dict) -> list[dict]:
    """compare's per-run checks (twin and provenance) and the study alone (over `seeds`: as across
    hardware, where the bitwise check cannot apply) of the buggy runs against the clean ones."""
    results = [RunResult(f"seed-{seed}", variant, {"seed": seed}, "", [runs[seed]["evaluation"]], runs[seed]["finetune"])
               for seed in seeds for variant, runs in (("distributed", buggy), ("baseline", clean))]
    epochs = config["pretrain"]["chunks"] * config["pretrain"]["epochs_per_job"]
    plan = Plan(epochs, {variant: {"first_chunk": 1, "epochs_per_job": config["pretrain"]["epochs_per_job"]} for variant in VARIANTS})
    verdicts = [row["verdict"] for row in summary_rows(results, provenance_checks(results, plan, jobs=None))]
    rows = [{"seeds": len(seeds), "check": "per run", "verdicts": {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}}]
    study = config["compare"]
    for metric in METRICS:
        pairs = [(buggy[seed], clean[seed]) for seed in seeds]
        values = [[metrics(run)[metric] for run in pair] for pair in pairs]
        row = equivalence([b for b, _ in values], [c for _, c in values], study["margin"][metric], study["alpha"], study["power"])
        rows.append({"seeds": len(seeds), "check": f"study {metric}", **row, "deltas": " ".join(f"{b - c:+.4g}" for b, c in values)})
    return rows


def metrics(run: dict) -> dict:
    return {"val_loss": run["evaluation"]["val_loss"], "spearman": run["finetune"]["spearman"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=CONFIG, help="the workflow config (default: config/config.yaml)")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--bugs", nargs="+", choices=list(RESUME_BUGS), default=list(RESUME_BUGS))
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    config = yaml.safe_load(args.config.read_text())
    args.workdir.mkdir(parents=True, exist_ok=True)
    simulated, experimental = args.workdir / "simulated.npz", args.workdir / "experimental.npz"
    if not simulated.exists():
        generate(DataConfig(**config["data"]), simulated, experimental, args.workdir / "metadata.json")
    chunks, per_job = config["pretrain"]["chunks"], config["pretrain"]["epochs_per_job"]
    tune = FinetuneConfig.from_dict(config["finetune"])
    runs = {name: {} for name in (CLEAN, *args.bugs)}
    for seed in args.seeds:
        params = TrainParams.from_dict(config["train"] | {"seed": seed})
        clean = pretrain(config, seed, simulated, args.workdir, args.threads)
        for name in runs:
            final = clean if name == CLEAN else train(
                params, simulated, args.workdir, f"{name}-{seed}", chunks, per_job, args.threads, bug=name, first_chunk=2,
                start=args.workdir / f"{CLEAN}-{seed}-chunk-1.pt")
            runs[name][seed] = measured(final, simulated, experimental, tune, args.threads, final.with_suffix(".json"))
            print(json.dumps({"seed": seed, "run": name, "val_loss": runs[name][seed]["evaluation"]["val_loss"],
                              "spearman": runs[name][seed]["finetune"]["spearman"]}), flush=True)
    demo_seeds = [seed for seed in args.seeds if seed in expand_variable("seed", config["sweep"]["seed"])]
    for bug in args.bugs:
        for seeds in dict.fromkeys(tuple(s) for s in (demo_seeds, args.seeds) if s):
            for row in judge(runs[CLEAN], runs[bug], list(seeds), config):
                print(json.dumps({"bug": bug, **row}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
