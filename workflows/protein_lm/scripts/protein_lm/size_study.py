"""Does pretraining pay at small training sizes? The fine-tuning size sweep over several
pretraining seeds, run by hand at any config (docs/protein_lm.md, "Fine-tuning").

For each seed: the clean pretraining run (negative_control.pretrain; reused where the work
directory has it), then `finetune`'s sweep (sizes x replicates, from scratch and one-hot ridge on
the same draws, each tuned on the validation split); then `compare`'s table: Spearman per method
and size with 95% CIs, and pretrained - baseline paired on the same draws. Prints one JSON object
per row. Each seed's sweep is kept in the work directory, so a longer list of seeds only
fine-tunes the new ones.

    cd workflows/protein_lm/scripts
    python -m protein_lm.size_study --seeds 1 2 3 4 5 --workdir /tmp/sizes [--hidden-fraction 0.5]
"""

import argparse
import json
from dataclasses import replace
from pathlib import Path

import yaml

from .compare import RunResult, finetune_size_rows
from .data import DataConfig, generate
from .finetuning import FinetuneConfig, finetune
from .negative_control import CONFIG, pretrain

SIZES = (16, 32, 64, 128)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=CONFIG, help="the workflow config (default: config/config.yaml)")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    parser.add_argument("--replicates", type=int, default=3)
    parser.add_argument("--hidden-fraction", type=float, help="data.hidden_fraction (the pretraining data does not depend on it)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    config = yaml.safe_load(args.config.read_text())
    data = config["data"] | ({} if args.hidden_fraction is None else {"hidden_fraction": args.hidden_fraction})
    args.workdir.mkdir(parents=True, exist_ok=True)
    simulated, experimental = args.workdir / "simulated.npz", args.workdir / f"experimental-{data['hidden_fraction']}.npz"
    if not experimental.exists():
        generate(DataConfig(**data), simulated, experimental, args.workdir / "metadata.json")
    tune = replace(FinetuneConfig.from_dict(config["finetune"]), train_sizes=tuple(args.sizes), replicates=args.replicates, baselines=True)
    results = []
    for seed in args.seeds:
        sweep = args.workdir / f"sweep-{data['hidden_fraction']}-{seed}.json"
        if not sweep.exists():
            pretrained = pretrain(config, seed, simulated, args.workdir, args.threads)
            sweep.write_text(json.dumps(finetune(pretrained, experimental, tune, args.threads)))
        results.append(RunResult(f"seed-{seed}", "baseline", {"seed": seed}, "", [], json.loads(sweep.read_text())))
        print(json.dumps({"seed": seed, "sweep": results[-1].finetune["sweep"]}), flush=True)
    for row in finetune_size_rows(results):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
