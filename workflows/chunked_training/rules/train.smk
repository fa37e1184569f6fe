def runtime_of(chunks):
    """A job's runtime: the config's per chunk, times the chunks it trains."""
    runtime = TRAINING["resources"].get("runtime")
    return None if runtime is None else runtime * chunks


rule train_chunk:
    """The epochs of one chunk: resumes from checkpoint k-1, writes checkpoint k. The htcannex
    profile rotates this rule between sites by its wildcards run and chunk."""
    input:
        unpack(previous_checkpoint),
        files=workflow_files(TRAINING["files"]),
    output:
        **checkpoint_files(CHECKPOINT),
    wildcard_constraints:
        variant="distributed",
    params:
        command=lambda w, input, output, threads: training_command(w, input, output, threads, int(w.chunk), int(w.chunk)),
    threads: TRAINING["threads"]
    resources:
        **{k: v for k, v in TRAINING["resources"].items() if k != "runtime"},
        runtime=runtime_of(1),
        htcannex_submit=htcannex_submit,
    log:
        "results/{experiment}/logs/train/{{variant}}/{{run}}/chunk-{{chunk}}.log".format(experiment=EXPERIMENT.slug),
    shell:
        "({params.command}) > {log} 2>&1"


rule train_baseline:
    """The twin of a run: the same epochs in one job over all of them, on one site (the profile
    pins this rule), so a resume bug shows as a difference between the twins."""
    input:
        files=workflow_files(TRAINING["files"]),
    output:
        **checkpoint_files(CHECKPOINT),
    wildcard_constraints:
        variant="baseline",
        chunk=str(CHUNKS),
    params:
        command=lambda w, input, output, threads: training_command(w, input, output, threads, 1, CHUNKS),
    threads: TRAINING["threads"]
    resources:
        **{k: v for k, v in TRAINING["resources"].items() if k != "runtime"},
        runtime=runtime_of(CHUNKS),
        htcannex_submit=htcannex_submit,
    log:
        "results/{experiment}/logs/train/{{variant}}/{{run}}/chunk-{{chunk}}.log".format(experiment=EXPERIMENT.slug),
    shell:
        "({params.command}) > {log} 2>&1"
