PAIRS = [(run, variant) for run in RUNS for variant in VARIANTS]  # the order of compare's inputs
FINAL_CHECKPOINTS = [final_checkpoint(variant, run) for run, variant in PAIRS]


rule compare:
    """Distributed runs against their twins trained unbroken: tables, verdict, figures."""
    input:
        checkpoints=[files["checkpoint"] for files in FINAL_CHECKPOINTS],
        checksums=[files["checkpoint_sidecar_0"] for files in FINAL_CHECKPOINTS if "checkpoint_sidecar_0" in files],
        evaluations=[path for run, variant in PAIRS for path in evaluations(variant, run)],
        finetunes=[f"results/finetune/{variant}/{run}.json" for run, variant in PAIRS],
    output:
        summary=report("results/compare/summary.tsv", caption="../report/summary.rst", category="Comparison"),
        per_site=report("results/compare/epoch_time_per_site.tsv", caption="../report/per_site.rst", category="Comparison"),
        loss_curves=report("results/compare/loss_curves.png", caption="../report/loss_curves.rst", category="Figures"),
        site_timeline=report("results/compare/site_timeline.png", caption="../report/site_timeline.rst", category="Figures"),
        epoch_times=report("results/compare/epoch_time_per_site.png", caption="../report/epoch_times.rst", category="Figures"),
    params:
        runs={run.uuid: {"swept": {name: run.vars[name] for name in EXPERIMENT.swept}, "seed_group": seed_group(run)}
              for run in RUNS.values()},
        evaluations=[evaluations(variant, run) for run, variant in PAIRS],
        compare=config["compare"],
    log:
        "results/logs/compare.log",
    script:
        "../scripts/compare.py"
