EVALUATE = config["evaluate"]
EVALUATION = "results/{experiment}/eval/{{variant}}/{{run}}/chunk-{{chunk}}.json".format(experiment=EXPERIMENT.slug)


def evaluation_command(wildcards, input, output, threads):
    """The evaluation command of one checkpoint, placeholders filled in."""
    values = EXPERIMENT.chunk_vars(RUNS[wildcards.run], int(wildcards.chunk)) | {
        "chunk": int(wildcards.chunk), "chunks": CHUNKS, "checkpoint": input.checkpoint,
        "write_to": output[0], "threads": threads, "workflow_dir": WORKFLOW_DIR,
    }
    return format_command(f"{EXPERIMENT_SOURCE}: evaluate.command", EVALUATE["command"], values, JOB_PYTHON)


def evaluations():
    """Every evaluation the config asks for: each chunk of a distributed run, the twin's end."""
    if not EVALUATE["command"] or TEMPLATE:  # an MLDAG experiment's evaluation is its own business
        return []
    chunks = {"distributed": range(1, CHUNKS + 1), "baseline": [CHUNKS]}
    return [EVALUATION.format(variant=v, run=run, chunk=c) for run in RUNS for v in VARIANTS for c in chunks[v]]


rule evaluate_chunk:
    """The config's evaluation command on one checkpoint (optional: evaluate.command)."""
    input:
        **checkpoint_files(CHECKPOINT),
        files=workflow_files(EVALUATE["files"]),
    output:
        EVALUATION,
    params:
        command=evaluation_command,
    threads: 1
    resources:
        **EVALUATE["resources"],
    log:
        "results/{experiment}/logs/evaluate/{{variant}}/{{run}}/chunk-{{chunk}}.log".format(experiment=EXPERIMENT.slug),
    shell:
        "({params.command}) > {log} 2>&1"
