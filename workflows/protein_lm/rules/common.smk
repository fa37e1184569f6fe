# What protein_lm's own rules share: data files, each run's training parameters.
from protein_lm.config import TrainParams


def train_params(run):
    """The run's TrainParams, as its training command passes them (seed: swept, or the run's own)."""
    values = {name: run.vars[name] for name in TRAIN_KEYS if name != "seed"}
    return TrainParams.from_dict(values | {"seed": run.vars.get("seed", run.seed)})


for _run in RUNS.values():
    train_params(_run).check(f"run {_run.uuid} {_run.vars}")

SIMULATED = store_file(SIMULATED_SCORES)
EXPERIMENTAL = store_file(data_file("SYNTHETIC_experimental_scores.npz"))


def seed_group(run):
    """Runs that differ only in seed share a group: their spread is the seed-to-seed noise."""
    return json.dumps({k: v for k, v in run.vars.items() if k != "seed"}, sort_keys=True)
