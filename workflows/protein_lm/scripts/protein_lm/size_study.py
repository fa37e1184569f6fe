"""Does pretraining pay at small training sizes? The fine-tuning size sweep over several
pretraining seeds, run by hand at any config (docs/protein_lm.md, "Fine-tuning").

For each seed: the clean pretraining run (negative_control.pretrain; reused where the work
directory has it), then `finetune`'s sweep (sizes x replicates, from scratch and one-hot ridge on
the same draws, each tuned on the validation split); then `compare`'s table: Spearman per method
and size with 95% CIs, and pretrained - baseline paired on the same draws. Prints one JSON object
per row. Each seed's sweep is kept in the work directory, so a longer list of seeds only
fine-tunes the new ones.

    cd workflows/protein_lm/scripts
    python -m protein_lm.size_study --seeds 1 2 3 4 5 --workdir /tmp/sizes [--hidden-fraction 0.5] [--n-experimental 2000 --sizes 1000]
"""

import argparse
import hashlib
import json
from dataclasses import asdict, replace
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
    parser.add_argument("--n-experimental", type=int, help="data.n_experimental (half of it for training: sizes up to that; the pretraining data stay the config's)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    config = yaml.safe_load(args.config.read_text())
    changed = {"hidden_fraction": args.hidden_fraction, "n_experimental": args.n_experimental}
    data = config["data"] | {key: value for key, value in changed.items() if value is not None}
    args.workdir.mkdir(parents=True, exist_ok=True)
    # Pretraining always uses the config's simulated data (the overrides change only the
    # experimental set: the same landscape, other variants); files are named by what they depend on.
    simulated, experimental = args.workdir / "simulated.npz", args.workdir / f"experimental-{digest(data)}.npz"
    if not simulated.exists():
        generate(DataConfig(**config["data"]), simulated, args.workdir / f"experimental-{digest(config['data'])}.npz",
                 args.workdir / "metadata.json")
    if not experimental.exists():  # its simulated file is written and not used
        generate(DataConfig(**data), args.workdir / f"simulated-{digest(data)}.npz", experimental, args.workdir / f"metadata-{digest(data)}.json")
    tune = replace(FinetuneConfig.from_dict(config["finetune"]), train_sizes=tuple(args.sizes), replicates=args.replicates, baselines=True)
    results = []
    for seed in args.seeds:
        sweep = args.workdir / f"sweep-{digest([data, asdict(tune)])}-{seed}.json"
        if not sweep.exists():
            pretrained = pretrain(config, seed, simulated, args.workdir, args.threads)
            sweep.write_text(json.dumps(finetune(pretrained, experimental, tune, args.threads)))
        results.append(RunResult(f"seed-{seed}", "baseline", {"seed": seed}, "", [], json.loads(sweep.read_text())))
        print(json.dumps({"seed": seed, "sweep": results[-1].finetune["sweep"]}), flush=True)
    for row in finetune_size_rows(results):
        print(json.dumps(row))
    return 0


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


if __name__ == "__main__":
    raise SystemExit(main())
