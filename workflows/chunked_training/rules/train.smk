def template_resource(wildcards):
    """The chunk's MLDAG submit template for htcannex (rules/mldag.smk)."""
    return chunk_template(wildcards.run, wildcards.chunk, wildcards.variant).encode()


def runtime_of(chunks):
    """A job's runtime: the config's per chunk, times the chunks it trains."""
    runtime = TRAINING["resources"].get("runtime")
    return None if runtime is None else runtime * chunks


rule train_chunk:
    """The epochs of one chunk: resumes from checkpoint k-1, writes checkpoint k. The htcannex
    profile rotates this rule between sites by its wildcards run and chunk."""
    input:
        unpack(previous_checkpoint),
        files=[] if TEMPLATE else workflow_files(TRAINING["files"]),  # a template lists its own
    output:
        **checkpoint_files(CHECKPOINT),
    wildcard_constraints:
        variant="distributed",
    params:
        command=lambda w, input, output, threads: training_command(w, input, output, threads, int(w.chunk), int(w.chunk)),
    threads: TRAINING["threads"]
    resources:
        # A template's request_* are its own, its {resource.*} defaults the profile's default-resources.
        **{k: v for k, v in TRAINING["resources"].items() if k != "runtime" and not TEMPLATE},
        runtime=runtime_of(1),
        htcannex_submit=htcannex_submit,
        **({submit_template.RESOURCE: template_resource} if TEMPLATE else {}),
    log:
        "results/{experiment}/logs/train/{{variant}}/{{run}}/chunk-{{chunk}}.log".format(experiment=EXPERIMENT.slug),
    shell:
        "({params.command}) > {log} 2>&1"


def no_previous_checkpoint(wildcards):
    return {}


rule train_baseline:
    """The twin of a run: the same epochs in one job over all of them, on one site (the profile
    pins this rule), so a resume bug shows as a difference between the twins. An MLDAG
    experiment's twin is its template with the twin's VARS (EXPERIMENT.baseline_vars); with
    study.twin: chunked, the run's chunks, each resuming the last, every one on the pinned site."""
    input:
        unpack(previous_checkpoint if TWIN_CHUNKED else no_previous_checkpoint),
        files=[] if TEMPLATE else workflow_files(TRAINING["files"]),
    output:
        **checkpoint_files(CHECKPOINT),
    wildcard_constraints:
        variant="baseline",
        chunk=r"\d+" if TWIN_CHUNKED else str(CHUNKS),
    params:
        command=lambda w, input, output, threads: training_command(
            w, input, output, threads, int(w.chunk) if TWIN_CHUNKED else 1, int(w.chunk)),
    threads: TRAINING["threads"]
    resources:
        **{k: v for k, v in TRAINING["resources"].items() if k != "runtime" and not TEMPLATE},
        runtime=runtime_of(1 if TWIN_CHUNKED else CHUNKS),
        htcannex_submit=htcannex_submit,
        **({submit_template.RESOURCE: template_resource} if TEMPLATE else {}),
    log:
        "results/{experiment}/logs/train/{{variant}}/{{run}}/chunk-{{chunk}}.log".format(experiment=EXPERIMENT.slug),
    shell:
        "({params.command}) > {log} 2>&1"


rule runs_table:
    """Each run's uuid, seed and var values: what names the files of a run. Its script also makes
    Snakemake ship this workflow's scripts/ (its package) with jobs that run Snakemake, wherever
    these rules are included from."""
    output:
        "results/{experiment}/runs.tsv".format(experiment=EXPERIMENT.slug),
    params:
        runs=[{"run_uuid": run.uuid, "random_seed": run.seed, **run.vars} for run in RUNS.values()],
    localrule: True
    script:
        "../scripts/runs_table.py"
