COMPARE = "results/{experiment}/compare".format(experiment=EXPERIMENT.slug)


def study_files():
    """run -> (the run's, its twin's) file of the experiment's study (study.file, $(run_uuid) filled)."""
    uuids = {run.uuid: (run.uuid, EXPERIMENT.baseline_vars(run)["run_uuid"]) for run in RUNS.values()}
    return {run: [STUDY.file.replace("$(run_uuid)", uuid) for uuid in pair] for run, pair in uuids.items()}


if STUDY:
    import chunked_training.equivalence  # scipy and statsmodels: refused before anything runs, naming the extra

# With a study: the study's tables and figure too (chunked_training.twin_study), which rule check judges.
STUDY_TABLES = {"equivalence": f"{COMPARE}/equivalence.tsv", "provenance": f"{COMPARE}/provenance.tsv",
                "equivalence_figure": f"{COMPARE}/equivalence.png"} if STUDY else {}


rule compare:
    """Each run's twins side by side: are the final checkpoints bitwise equal (a template's
    checkpoints are records of VARS, not compared) and the evaluations; an MLDAG experiment's
    study instead: its metric per run and twin, the paired equivalence study per seed group, the
    provenance of its numbers. With a study it runs here: its files came back with the chunks,
    undeclared."""
    input:
        distributed=[final_checkpoint("distributed", run)["checkpoint"] for run in RUNS],
        baseline=[final_checkpoint("baseline", run)["checkpoint"] for run in RUNS] if "baseline" in VARIANTS else [],
        evaluations=evaluations(),
    output:
        summary=f"{COMPARE}/summary.tsv",
        **STUDY_TABLES,
    params:
        runs={run.uuid: {name: run.vars[name] for name in EXPERIMENT.swept} for run in RUNS.values()},
        final_chunk=CHUNKS,
        bitwise=not TEMPLATE,
        study=dataclasses.asdict(STUDY) | {"files": study_files()} if STUDY else None,
    localrule: bool(STUDY)
    log:
        "results/{experiment}/logs/compare.log".format(experiment=EXPERIMENT.slug),
    script:
        "../scripts/compare.py"


if STUDY:

    rule check:
        """The study's verdict: fails the workflow, naming each failed check, when a run's twin
        check is an ERROR (a missing metric, or a difference study.bitwise forbids) or, unless
        allow_not_equivalent, a seed group's study puts the metric beyond the margin; prints the
        tables either way."""
        localrule: True
        retries: 0  # deterministic: a profile's --retries would only print the same failure again
        input:
            summary=rules.compare.output.summary,
            equivalence=rules.compare.output.equivalence,
        output:
            f"{COMPARE}/check.txt",
        params:
            allow_not_equivalent=config.get("allow_not_equivalent") in (True, "true"),
            summary_columns=["run", *EXPERIMENT.swept, f"{STUDY.metric}:delta", "verdict"],
            study_columns=["group", "metric", "pairs", "mean_delta", "ci_low", "ci_high", "seeds_needed", "verdict"],
        log:
            "results/{experiment}/logs/check.log".format(experiment=EXPERIMENT.slug),
        script:
            "../scripts/check.py"
