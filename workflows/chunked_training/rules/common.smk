# Runs, chunks and file names: the one chunking implementation (protein_lm includes it too).
# Needs rules/store.smk included before it.
import json
import os
import sys

# The workflow's package lives in its scripts/ (Snakemake ships script directories with jobs).
sys.path.insert(0, os.path.join(workflow.current_basedir.get_path_or_uri(secret_free=True), "..", "scripts"))

from chunked_training.experiment import CHUNKED, format_command, load, read, study

# The including Snakefile's directory (HERE) as seen from the working directory: {workflow_dir}
# in commands and files (chunked_training's own, or protein_lm's when it includes these rules).
WORKFLOW_DIR = os.path.relpath(HERE)


def workflow_files(paths):
    """Paths with {workflow_dir} filled in; URLs of the checkpoint store as its storage files."""
    return [store_file(path) if is_store_url(path) else os.path.normpath(path.replace("{workflow_dir}", WORKFLOW_DIR))
            for path in paths]


EXPERIMENT_SOURCE, EXPERIMENT_CONFIG = read(config)
EXPERIMENT = load(EXPERIMENT_SOURCE, EXPERIMENT_CONFIG)
RUNS = EXPERIMENT.runs
CHUNKS = EXPERIMENT.chunking.chunks
TRAINING = config["training"]
# An MLDAG experiment's submit_template is the training command and the chunk's submit description
# (rules/mldag.smk); its checkpoints are wherever its transfer lists say, so a chunk's own output
# is a record of its VARS, and it has no twin (its checkpoint paths name only the run).
TEMPLATE = EXPERIMENT_CONFIG.get("submit_template")
# {python}: the Python htcannex names in the job's environment (HTCANNEX_PYTHON, the plugin's
# paths.JOB_PYTHON_VARIABLE: `python` on a real execute point, where this side's path means
# nothing), else this Snakemake's own (a local run). Expanded by the job's shell.
JOB_PYTHON = {"python": '"${HTCANNEX_PYTHON:-%s}"' % sys.executable}
# An MLDAG experiment's runs get twins where it names the study they are for (study:).
STUDY = study(EXPERIMENT_SOURCE, EXPERIMENT_CONFIG) if TEMPLATE else None
# A twin in chunks (study.twin: chunked) trains the run's chunks, each resuming the last, every one
# on the pinned site; else the twin is one job over every epoch (chunk CHUNKS).
TWIN_CHUNKED = bool(STUDY) and STUDY.twin == CHUNKED
VARIANTS = ("distributed", "baseline") if config["baseline"] == "unbroken" and (not TEMPLATE or STUDY) else ("distributed",)
CHECKPOINT_SUFFIX = ".vars.json" if TEMPLATE else TRAINING["checkpoint_suffix"]
SIDECARS = [] if TEMPLATE else TRAINING["sidecars"]

wildcard_constraints:
    run="[0-9a-f]{8}",
    chunk=r"\d+",
    variant="distributed|baseline",

# A new name per chunk: OSDF objects are immutable and caches serve the first bytes; the base name
# alone is unique too (HTCondor drops URL inputs into the sandbox by base name).
CHECKPOINT = "{variant}/{run}/{variant}-{run}-chunk-{chunk}" + CHECKPOINT_SUFFIX
# Everything a checkpoint depends on but the run's vars: a changed command or chunking writes new
# objects instead of meeting the old, immutable ones. `checkpoint_depends_on` adds the user's own.
CHECKPOINT_SET = content_hash(
    [TEMPLATE or TRAINING["command"], CHUNKS, EXPERIMENT.chunking.epochs, config.get("checkpoint_depends_on")])

if config["checkpoint_store"] == "osdf" and not TEMPLATE:
    from snakemake_storage_plugin_osdf.integrity import SIDECAR_SUFFIX

    def checkpoint_files(relative, name="checkpoint"):
        """Named files of one checkpoint: objects of the store, the command's sidecars each an object
        next to it, but a .sha256 (SIDECAR_SUFFIX): the osdf provider moves each object's checksum
        sidecar itself."""
        url = store_url(f"{EXPERIMENT.slug}/set-{CHECKPOINT_SET}/{relative}")
        return {name: store_file(url)} | {f"{name}_sidecar_{i}": store_file(url + suffix)
                                          for i, suffix in enumerate(SIDECARS) if suffix != SIDECAR_SUFFIX}

else:

    def checkpoint_files(relative, name="checkpoint"):
        """Named files of one checkpoint: the command's sidecars are declared with it, so executors
        without a shared filesystem move them along."""
        path = f"results/{EXPERIMENT.slug}/checkpoints/{relative}"
        return {name: path} | {f"{name}_sidecar_{i}": path + suffix for i, suffix in enumerate(SIDECARS)}


def chunk_checkpoint(variant, run, chunk, name="checkpoint"):
    return checkpoint_files(CHECKPOINT.format(variant=variant, run=run, chunk=chunk), name)


def final_checkpoint(variant, run):
    """Both twins end with a checkpoint named after the last chunk."""
    return chunk_checkpoint(variant, run, CHUNKS)


def previous_checkpoint(wildcards):
    """Chunk k resumes from checkpoint k-1; chunk 1 starts from the run's seed."""
    chunk = int(wildcards.chunk)
    return {} if chunk == 1 else chunk_checkpoint(wildcards.variant, wildcards.run, chunk - 1, "previous")


def self_checkpoint_name(wildcards):
    """The chunk's resumable file, in the job's working directory (HTCondor transfers it)."""
    return f"selfckpt-{wildcards.variant}-{wildcards.run}-{wildcards.chunk}{CHECKPOINT_SUFFIX}"


def htcannex_submit(wildcards):
    """The rule's submit commands (htcannex_submit): the config's own, and self-checkpointing
    (exit code 85 means "saved, restart me"; the file and its sidecars travel with the job)."""
    commands = dict(TRAINING["submit"])
    if TRAINING["self_checkpoint"]:
        name = self_checkpoint_name(wildcards)
        commands |= {"checkpoint_exit_code": 85,
                     "transfer_checkpoint_files": ", ".join([name] + [name + s for s in SIDECARS])}
    return json.dumps(commands)


def training_command(wildcards, input, output, threads, first_chunk, last_chunk):
    """The training command of chunks first_chunk..last_chunk of a run, placeholders filled in."""
    if TEMPLATE:
        return mldag_command(wildcards, output)
    run = RUNS[wildcards.run]
    values = EXPERIMENT.chunk_vars(run, last_chunk) | {
        "first_epoch": EXPERIMENT.chunking.last_epoch(first_chunk - 1) + 1,
        "chunk": last_chunk,
        "chunks": CHUNKS,
        "resume_from": input.get("previous", ""),
        "write_to": output.checkpoint,
        "self_checkpoint": self_checkpoint_name(wildcards),
        "threads": threads,
        "workflow_dir": WORKFLOW_DIR,
    }
    return format_command(f"{EXPERIMENT_SOURCE}: training.command", TRAINING["command"], values, JOB_PYTHON)
