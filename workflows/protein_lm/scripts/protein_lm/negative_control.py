"""The equivalence study's negative control at any config size, run by hand (docs/protein_lm.md).

For each seed: the unbroken run (one job over all epochs, the pinned twin) and the chunked run
with the injected resume bug ($PROTEIN_LM_INJECT_RESUME_BUG=fresh-optimizer at every hop), each
evaluated (val loss) and fine-tuned (Spearman) as the workflow does; then the paired study with
the config's margins. Prints one JSON object per metric.

    cd workflows/protein_lm/scripts
    python -m protein_lm.negative_control --seeds 1 2 3 4 5 --workdir /tmp/negctl
"""

import argparse
import json
import os
from pathlib import Path

import yaml

from .compare import equivalence
from .config import TrainParams
from .data import DataConfig, generate
from .evaluation import evaluate_checkpoint
from .finetuning import FinetuneConfig, finetune
from .training import RESUME_BUG_VARIABLE, ChunkJob, SelfCheckpoint, train_chunk

CONFIG = Path(__file__).resolve().parents[2] / "config" / "config.yaml"


def train(params: TrainParams, data: Path, workdir: Path, name: str, chunks: int, epochs_per_job: int, threads: int) -> Path:
    previous = None
    for chunk in range(1, chunks + 1):
        output = workdir / f"{name}-chunk-{chunk}.pt"
        train_chunk(ChunkJob(f"seed-{params.seed}", params, data, chunk, epochs_per_job, chunks * epochs_per_job, previous,
                             output, SelfCheckpoint(workdir / f"self-{name}.pt", 0, False), threads))
        previous = output
    return previous


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=CONFIG, help="the workflow config (default: config/config.yaml)")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    config = yaml.safe_load(args.config.read_text())
    args.workdir.mkdir(parents=True, exist_ok=True)
    simulated, experimental = args.workdir / "simulated.npz", args.workdir / "experimental.npz"
    generate(DataConfig(**config["data"]), simulated, experimental, args.workdir / "metadata.json")
    chunks, per_job = config["pretrain"]["chunks"], config["pretrain"]["epochs_per_job"]
    tune = FinetuneConfig.from_dict(config["finetune"])
    metrics = {"val_loss": ([], []), "spearman": ([], [])}  # (distributed, baseline) per seed
    for seed in args.seeds:
        params = TrainParams.from_dict(config["train"] | {"seed": seed})
        unbroken = train(params, simulated, args.workdir, f"unbroken-{seed}", 1, chunks * per_job, args.threads)
        os.environ[RESUME_BUG_VARIABLE] = "fresh-optimizer"
        try:
            hopping = train(params, simulated, args.workdir, f"buggy-{seed}", chunks, per_job, args.threads)
        finally:
            del os.environ[RESUME_BUG_VARIABLE]
        for column, path in ((0, hopping), (1, unbroken)):
            metrics["val_loss"][column].append(evaluate_checkpoint(path, simulated, args.threads)["val_loss"])
            metrics["spearman"][column].append(finetune(path, experimental, tune, args.threads)["spearman"])
        print(json.dumps({"seed": seed, **{m: {"buggy": v[0][-1], "unbroken": v[1][-1]} for m, v in metrics.items()}}), flush=True)
    study = config["compare"]
    for metric, (buggy, unbroken) in metrics.items():
        row = equivalence(buggy, unbroken, study["margin"][metric], study["alpha"], study["power"])
        print(json.dumps({"metric": metric, **row}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
