FINAL_CHECKPOINTS = [final_checkpoint(variant, run) for run in RUNS for variant in VARIANTS]


rule compare:
    """Distributed runs against their pinned twins: tables, verdict, figures."""
    input:
        checkpoints=[files["checkpoint"] for files in FINAL_CHECKPOINTS],
        checksums=[files["checkpoint_checksum"] for files in FINAL_CHECKPOINTS if "checkpoint_checksum" in files],
        evaluations=[f"results/eval/{v}/{run}/chunk-{c}.json" for run in RUNS for v in VARIANTS for c in range(1, CHUNKS + 1)],
        finetunes=[f"results/finetune/{v}/{run}.json" for run in RUNS for v in VARIANTS],
    output:
        summary=report("results/compare/summary.tsv", caption="../report/summary.rst", category="Comparison"),
        per_site=report("results/compare/epoch_time_per_site.tsv", caption="../report/per_site.rst", category="Comparison"),
        loss_curves=report("results/compare/loss_curves.png", caption="../report/loss_curves.rst", category="Figures"),
        site_timeline=report("results/compare/site_timeline.png", caption="../report/site_timeline.rst", category="Figures"),
        epoch_times=report("results/compare/epoch_time_per_site.png", caption="../report/epoch_times.rst", category="Figures"),
    params:
        runs={run.id: {"swept": run.swept, "seed_group": seed_group(run)} for run in RUNS.values()},
        chunks=CHUNKS,
        compare=config["compare"],
    log:
        "results/logs/compare.log",
    script:
        "../scripts/compare.py"
