rule compare:
    """Each run's twins side by side: are the final checkpoints bitwise equal, and the evaluations."""
    input:
        distributed=[final_checkpoint("distributed", run)["checkpoint"] for run in RUNS],
        baseline=[final_checkpoint("baseline", run)["checkpoint"] for run in RUNS] if "baseline" in VARIANTS else [],
        evaluations=evaluations(),
    output:
        summary="results/{experiment}/compare/summary.tsv".format(experiment=EXPERIMENT.slug),
    params:
        runs={run.uuid: {name: run.vars[name] for name in EXPERIMENT.swept} for run in RUNS.values()},
        final_chunk=CHUNKS,
    log:
        "results/{experiment}/logs/compare.log".format(experiment=EXPERIMENT.slug),
    script:
        "../scripts/compare.py"
