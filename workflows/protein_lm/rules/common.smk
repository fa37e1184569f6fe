# Runs of the sweep, file names, and what the rules share.
import hashlib
import json

from protein_lm.config import TrainParams
from protein_lm.sweep import expand_sweep, seed_group

RUNS = {run.id: run for run in expand_sweep(config["train"], config["sweep"])}
for _run in RUNS.values():
    TrainParams.from_dict(_run.params).check(f"run {_run.id} {_run.swept}")
CHUNKS = config["pretrain"]["chunks"]
VARIANTS = ("distributed", "baseline")  # train_chunk hops between sites; train_baseline is pinned

DATA = "results/data"
SIMULATED = f"{DATA}/SYNTHETIC_simulated_scores.tsv"
EXPERIMENTAL = f"{DATA}/SYNTHETIC_experimental_scores.tsv"

wildcard_constraints:
    run="[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    chunk=r"\d+",
    variant="|".join(VARIANTS),


# A new name per chunk: OSDF objects are immutable and caches serve the first bytes. The base
# name alone is unique too: HTCondor drops URL inputs into the sandbox by base name, and
# compare reads the final checkpoint of every run and variant.
CHECKPOINT = "{variant}/{run}/{variant}-{run}-chunk-{chunk}.pt"

if config["checkpoint_store"] == "osdf":
    # The run id covers the train parameters; this directory covers the rest of what a
    # checkpoint depends on (the data and the chunking), so changing those writes new
    # objects instead of refusing to overwrite the old ones.
    TRAINING_SET = hashlib.sha256(json.dumps([config["data"], config["pretrain"]], sort_keys=True).encode()).hexdigest()[:12]

    storage osdf:
        provider="osdf",

    def checkpoint_files(relative, name="checkpoint"):
        """Named files of one checkpoint; the osdf provider moves its checksum sidecar itself."""
        return {name: storage.osdf(f"{config['osdf_prefix'].rstrip('/')}/set-{TRAINING_SET}/{relative}")}

else:

    def checkpoint_files(relative, name="checkpoint"):
        """Named files of one checkpoint: declaring the sidecar that training writes makes
        executors without a shared filesystem move it along with the checkpoint."""
        path = f"results/checkpoints/{relative}"
        return {name: path, f"{name}_checksum": f"{path}.sha256"}


def previous_checkpoint(wildcards):
    """Chunk k reads checkpoint k-1; chunk 1 starts from the run's seed."""
    chunk = int(wildcards.chunk)
    if chunk == 1:
        return {}
    return checkpoint_files(CHECKPOINT.format(variant=wildcards.variant, run=wildcards.run, chunk=chunk - 1), "previous")


def final_checkpoint(variant, run):
    return checkpoint_files(CHECKPOINT.format(variant=variant, run=run, chunk=CHUNKS))


def self_checkpoint_name(wildcards):
    """The chunk's resumable file, in the job's working directory (HTCondor transfers it)."""
    return f"selfckpt-{wildcards.variant}-{wildcards.run}-{wildcards.chunk}.pt"


def self_checkpoint_submit(wildcards):
    """Submit commands for self-checkpointing (htcannex_submit, docs/architecture.md): exit
    code 85 means "saved, restart me"; the file and its checksum travel with the job."""
    if not config["pretrain"]["checkpoint_every_steps"]:
        return "{}"
    name = self_checkpoint_name(wildcards)
    return json.dumps({"checkpoint_exit_code": 85, "transfer_checkpoint_files": f"{name}, {name}.sha256"})


def run_params(wildcards):
    return RUNS[wildcards.run].params
