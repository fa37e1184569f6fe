# protein_lm's config as chunked_training's (../chunked_training/rules/common.smk reads these
# keys): train's values and sweep's variables become vars, pretrain makes the chunks, and
# scripts/train_chunk.py is the training command.
from dataclasses import fields

from protein_lm.config import ConfigError, TrainParams
from protein_lm.sweep import expand_variable
from protein_lm.training import RESUME_BUGS

TRAIN_KEYS = [f.name for f in fields(TrainParams)]


def _chunked_vars(config):
    pretrain = config["pretrain"]
    specs = {
        "epochs": {"type": "value", "value": pretrain["chunks"] * pretrain["epochs_per_job"]},
        "epochs_per_job": {"type": "value", "value": pretrain["epochs_per_job"]},
        "checkpoint_every_steps": {"type": "value", "value": pretrain["checkpoint_every_steps"]},
        "checkpoint_every_minutes": {"type": "value", "value": pretrain["checkpoint_every_minutes"]},
    }
    specs |= {name: {"type": "value", "value": value} for name, value in config["train"].items()}
    # protein_lm's sweep ranges may be fractional (MLDAG's are Python's range): give the values.
    specs |= {name: {"type": "list", "value": expand_variable(name, spec)} for name, spec in config["sweep"].items()}
    return specs


def _training_command(specs):
    seed = "{seed}" if "seed" in specs else "{random_seed}"  # unless seeds are swept, each run its own
    params = " ".join(f"{name}={{{name}}}" for name in TRAIN_KEYS if name != "seed")
    return (
        "{python} {workflow_dir}/scripts/train_chunk.py --run {run_uuid} --chunk {chunk} "
        "--epochs-per-job {epochs_per_job} --total-epochs {epochs} --data " + str(store_file(SIMULATED_SCORES)) + " "
        "--resume-from {resume_from} --write-to {write_to} --self-checkpoint {self_checkpoint} "
        "--checkpoint-every-steps {checkpoint_every_steps} --checkpoint-every-minutes {checkpoint_every_minutes} "
        "--threads {threads} "
        f"--params seed={seed} {params}"
    ) + (f" --inject-resume-bug {config['inject_resume_bug']}" if config["inject_resume_bug"] else "")


if config["inject_resume_bug"] not in (None, *RESUME_BUGS):
    raise ConfigError(f"config key 'inject_resume_bug': {config['inject_resume_bug']!r} is no injectable resume bug; "
                      f"choose one of {', '.join(RESUME_BUGS)} (a negative control), or null")
NAME = "protein_lm"
DATA = "results/data"


def data_file(name):
    """A data file every run reads: with the osdf checkpoint store an object next to the
    checkpoints, named by the data config (jobs get it from OSDF, not from the access point)."""
    if config["checkpoint_store"] == STORE:
        return store_url(f"{NAME}/data-{content_hash(config['data'])}/{name}")
    return f"{DATA}/{name}"


SIMULATED_SCORES = data_file("SYNTHETIC_simulated_scores.npz")  # in the config: a path or URL
_vars = _chunked_vars(config)
config |= {
    "name": NAME,
    "vars": _vars,
    "training": {
        "command": _training_command(_vars),
        # A chunk's job runs the command alone (htcannex: OSDF checkpoints too), which needs its
        # script and package as inputs.
        "files": [SIMULATED_SCORES, "{workflow_dir}/scripts/train_chunk.py", "{workflow_dir}/scripts/protein_lm"],
        "checkpoint_suffix": ".pt",
        "sidecars": [".sha256"],
        "self_checkpoint": bool(config["pretrain"]["checkpoint_every_steps"] or config["pretrain"]["checkpoint_every_minutes"]),
        "threads": config["pretrain"]["threads"],
        "resources": {"mem_mb": config["pretrain"]["mem_mb"], "runtime": config["pretrain"]["runtime"]},
        "submit": {},
    },
    "baseline": "unbroken",
    # The data and the model shape decide a checkpoint as much as the command does.
    "checkpoint_depends_on": config["data"],
}
