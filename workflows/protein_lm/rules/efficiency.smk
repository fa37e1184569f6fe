# htcannex's efficiency and provenance report of this run (docs/report.md) as figures in
# `snakemake --report`. Not part of `all`: it reads the event log that only a run with
# `--executor htcannex` writes (.htcannex/jobs.log in the working directory). After a run:
#   snakemake --executor htcannex --profile profiles/local -s workflows/protein_lm/Snakefile efficiency_report
#   snakemake --report report.html -s workflows/protein_lm/Snakefile efficiency_report


localrules:
    efficiency_report,


rule efficiency_report:
    """Per job and per site: waits, transfers, compute, badput, usage against requests; advice."""
    input:
        rules.compare.output,  # after the run's last job
    output:
        sites=report("results/efficiency/sites.png", caption="../report/efficiency_sites.rst", category="Efficiency"),
        timeline=report("results/efficiency/timeline.png", caption="../report/efficiency_timeline.rst", category="Efficiency"),
        requests=report("results/efficiency/requests.png", caption="../report/efficiency_requests.rst", category="Efficiency"),
        jobs=report("results/efficiency/jobs.tsv", caption="../report/efficiency_jobs.rst", category="Efficiency"),
    params:
        # the htcannex of the Python that runs this Snakemake (its venv need not be on PATH)
        htcannex=f"{sys.executable} -m snakemake_executor_plugin_htcannex.cli",
        event_log=".htcannex/jobs.log",
        epochs_per_job=config["pretrain"]["epochs_per_job"],
    log:
        "results/logs/efficiency_report.log",
    shell:
        "{params.htcannex} report {params.event_log} --epochs-per-job {params.epochs_per_job} "
        "--figures $(dirname {output.sites}) --tsv {output.jobs} > {log} 2>&1"
