"""`htcannex experiment plan | run EXPERIMENT.yaml --profile P [--resources resources.yaml]`: an
MLDAG experiment as its users write it, run by workflows/chunked_training (docs/mldag.md).

`plan` prints every chunk the run would train with the site it lands on and the command it runs,
then the plan's skips, impossible chunks and budget: each chunk is placed by placement.place, the
one judgement `htcannex annex plan`, `snakemake -n` and the run's executor make, with the request
the template makes at each site (a site it cannot run at is skipped, `*`; a chunk no site can run
is `!`). Nothing is submitted. It refuses a template that is no submit description at any site.
`run` makes those refusals, then runs the workflow with Snakemake and htcannex in this directory.
"""
import subprocess
import sys
from pathlib import Path

from snakemake_executor_plugin_htcannex import paths
from snakemake_executor_plugin_htcannex.sites.catalogue import HtcannexConfigError, load_catalogue
from snakemake_executor_plugin_htcannex.ops.plan import plan_jobs, render_plan
from snakemake_executor_plugin_htcannex.submit.template import ChunkTemplate, TemplateError, command, merge, parse
from snakemake_executor_plugin_htcannex.commands._common import add_verbs, catalogue_path
from snakemake_executor_plugin_htcannex.commands.annex import needed_jobs

WORKFLOW = Path(__file__).resolve().parents[2] / "workflows" / "chunked_training"
TRAINING_RULE = "train_chunk"  # the rule the profile's rotation places


def commands(args) -> dict[tuple[str, int], list[str]]:
    """The command of every chunk by (run uuid, chunk); TemplateError for a template that is no
    submit description whatever the site (what depends on the site, placement judges)."""
    sys.path.insert(0, str(WORKFLOW / "scripts"))  # the workflow's package, as its Snakefile does
    from chunked_training.experiment import load, read
    from chunked_training.variables import VarsError

    try:
        source, config = read({"experiment": args.experiment})
        experiment = load(source, config)
    except VarsError as error:
        raise TemplateError(str(error)) from None
    if not config.get("submit_template"):
        raise TemplateError(f"{source}: no submit_template; an MLDAG experiment has name, submit_template and vars")
    resources = _resources(args.resources)
    argvs = {}
    for run in experiment.runs.values():
        for chunk in range(1, experiment.chunking.chunks + 1):
            submit = parse(ChunkTemplate(config["submit_template"], experiment.chunk_vars(run, chunk), resources),
                           None, source)
            merge(submit, {})
            argvs[run.uuid, chunk] = command(submit, source)
    return argvs


def plan(args) -> int:
    argvs = commands(args)
    catalogue = load_catalogue(catalogue_path(args))
    planned = plan_jobs(catalogue, needed_jobs(WORKFLOW / "Snakefile", Path.cwd(), _config(args)))
    cells = {(job.run, job.chunk): job.cell for job in planned if job.rule == TRAINING_RULE}
    print(f"{'run':<10}{'chunk':>6}  {'site':<12}command")
    for (run, chunk), argv in argvs.items():
        if (run, chunk) in cells:  # a chunk already trained is not run again
            print(f"{run:<10}{chunk:>6}  {cells[run, chunk]:<12}{subprocess.list2cmdline(argv)}")
    if planned:
        from snakemake_executor_plugin_htcannex.annex.manager import AnnexLedger

        print("\n" + render_plan(catalogue, planned, AnnexLedger(paths.annex_ledger()).spent_core_hours()))
    return 0


def run(args) -> int:
    commands(args)  # every refusal before anything is submitted
    config = [f"{key}={value}" for key, value in _config(args).items()]
    snakemake = [str(Path(sys.executable).parent / "snakemake"), "--executor", "htcannex", "--profile", args.profile,
                 "-s", str(WORKFLOW / "Snakefile"), "--config", *config]
    return subprocess.run(snakemake).returncode


def _config(args) -> dict:
    """The workflow's config for this experiment (Snakemake's --config)."""
    config = {"experiment": str(Path(args.experiment).resolve())}
    if args.resources:
        config["experiment_resources"] = str(Path(args.resources).resolve())
    return config


def _resources(path: str | None) -> dict:
    """An MLDAG resources.yaml: site name -> values for {resource.*} over the catalogue's."""
    if not path:
        return {}
    import yaml

    values = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(values, dict) or not all(isinstance(v, dict) for v in values.values()):
        raise HtcannexConfigError(path, "(top level)", "not a mapping of site name to {name: value}",
                                  "write it as MLDAG's resources.yaml: `expanse: {mem_mb: 92000, gpus: 1}`")
    return values


def register(nouns) -> None:
    verbs = add_verbs(nouns, "experiment", "plan or run an MLDAG Experiment.yaml", (
        ("plan", plan, "print runs x chunks -> sites and each chunk's command (nothing is submitted)"),
        ("run", run, "run the experiment: snakemake with htcannex and workflows/chunked_training"),
    ))
    for verb in verbs.values():
        verb.add_argument("experiment", metavar="EXPERIMENT.yaml", help="MLDAG's Experiment.yaml, unchanged")
        verb.add_argument("--profile", required=True, help="Snakemake profile name or directory holding htcannex.yaml")
        verb.add_argument("--resources", metavar="resources.yaml",
                          help="MLDAG's resources.yaml: values for {resource.*} per site, over the catalogue's")
        verb.set_defaults(htcannex_config=None)

