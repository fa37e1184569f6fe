def study_files():
    """run -> (the run's, its twin's) file of the experiment's study (study.file, $(run_uuid) filled)."""
    uuids = {run.uuid: (run.uuid, EXPERIMENT.baseline_vars(run)["run_uuid"]) for run in RUNS.values()}
    return {run: [STUDY.file.replace("$(run_uuid)", uuid) for uuid in pair] for run, pair in uuids.items()}


rule compare:
    """Each run's twins side by side: are the final checkpoints bitwise equal (a template's
    checkpoints are records of VARS, not compared), the evaluations, and an MLDAG experiment's study
    metric. With a study it runs here: its files came back with the chunks, undeclared."""
    input:
        distributed=[final_checkpoint("distributed", run)["checkpoint"] for run in RUNS],
        baseline=[final_checkpoint("baseline", run)["checkpoint"] for run in RUNS] if "baseline" in VARIANTS else [],
        evaluations=evaluations(),
    output:
        summary="results/{experiment}/compare/summary.tsv".format(experiment=EXPERIMENT.slug),
    params:
        runs={run.uuid: {name: run.vars[name] for name in EXPERIMENT.swept} for run in RUNS.values()},
        final_chunk=CHUNKS,
        bitwise=not TEMPLATE,
        study={"metric": STUDY.metric, "margin": STUDY.margin, "files": study_files()} if STUDY else None,
    localrule: bool(STUDY)
    log:
        "results/{experiment}/logs/compare.log".format(experiment=EXPERIMENT.slug),
    script:
        "../scripts/compare.py"
