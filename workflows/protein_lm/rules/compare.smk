PAIRS = [(run, variant) for run in RUNS for variant in VARIANTS]  # the order of compare's inputs
EPOCHS = CHUNKS * config["pretrain"]["epochs_per_job"]


rule compare:
    """Distributed runs against their twins trained unbroken: provenance, bitwise twins, the paired
    equivalence study; tables and figures. Local: it checks every epoch's job against the
    executor's event log, which is where Snakemake runs; it reads the evaluations (which carry
    each final checkpoint's history and weights digest), never a checkpoint."""
    localrule: True
    input:
        evaluations=[path for run, variant in PAIRS for path in evaluations(variant, run)],
        finetunes=[f"results/finetune/{variant}/{run}.json" for run, variant in PAIRS],
    output:
        summary=report("results/compare/summary.tsv", caption="../report/summary.rst", category="Comparison"),
        equivalence=report("results/compare/equivalence.tsv", caption="../report/equivalence.rst", category="Comparison"),
        provenance=report("results/compare/provenance.tsv", caption="../report/provenance.rst", category="Comparison"),
        finetune_sizes=report("results/compare/finetune_sizes.tsv", caption="../report/finetune_sizes.rst", category="Fine-tuning"),
        per_site=report("results/compare/epoch_time_per_site.tsv", caption="../report/per_site.rst", category="Comparison"),
        loss_curves=report("results/compare/loss_curves.png", caption="../report/loss_curves.rst", category="Figures"),
        site_timeline=report("results/compare/site_timeline.png", caption="../report/site_timeline.rst", category="Figures"),
        epoch_times=report("results/compare/epoch_time_per_site.png", caption="../report/epoch_times.rst", category="Figures"),
        equivalence_figure=report("results/compare/equivalence.png", caption="../report/equivalence.rst", category="Figures"),
        finetune_sizes_figure=report("results/compare/finetune_sizes.png", caption="../report/finetune_sizes.rst", category="Fine-tuning"),
    params:
        runs={run.uuid: {"swept": {name: run.vars[name] for name in EXPERIMENT.swept}, "seed_group": seed_group(run)}
              for run in RUNS.values()},
        evaluations=[evaluations(variant, run) for run, variant in PAIRS],
        # The plan provenance is checked against: chunk k of a distributed run trains epochs
        # (k-1) x epochs_per_job + 1 .., the twin's one job (chunk CHUNKS) trains them all.
        plan={"total_epochs": EPOCHS,
              "distributed": {"first_chunk": 1, "epochs_per_job": config["pretrain"]["epochs_per_job"]},
              "baseline": {"first_chunk": CHUNKS, "epochs_per_job": EPOCHS}},
        compare=config["compare"],
    log:
        "results/logs/compare.log",
    script:
        "../scripts/compare.py"


rule check:
    """The run's verdict: fails the workflow, naming each failed check, when twins differ on the
    same hardware, provenance failed, or (unless allow_not_equivalent) the study puts a metric
    beyond its margin; prints the tables either way."""
    localrule: True
    retries: 0  # deterministic: a profile's --retries would only print the same failure again
    input:
        summary=rules.compare.output.summary,
        equivalence=rules.compare.output.equivalence,
    output:
        "results/compare/check.txt",
    params:
        allow_not_equivalent=config["allow_not_equivalent"] in (True, "true"),
        summary_columns=["run", "val_loss:delta", "spearman:delta", "verdict"],
        study_columns=["group", "metric", "pairs", "mean_delta", "ci_low", "ci_high", "verdict"],
    log:
        "results/logs/check.log",
    script:
        "../../chunked_training/scripts/check.py"
