"""`htcannex experiment plan | run EXPERIMENT.yaml --profile P [--resources resources.yaml]`: an
MLDAG experiment as its users write it, run by workflows/chunked_training (docs/mldag.md).

`plan` prints every run's chunks with the site each lands on and the command it runs, and refuses
a template command that contradicts a site; nothing is submitted. `run` makes the same checks,
then runs the workflow with Snakemake and htcannex in this directory.
"""
import subprocess
import sys
from pathlib import Path

from ..catalogue import HtcannexConfigError, load_catalogue
from ..site import ResourceRequest
from ..submit_template import ChunkTemplate, TemplateError, command, merge, parse, requested
from ._common import catalogue_path

WORKFLOW = Path(__file__).resolve().parents[2] / "workflows" / "chunked_training"
TRAINING_RULE = "train_chunk"  # the rule the profile's rotation places


def chunks(args) -> list[tuple[str, int, str | None, list[str]]]:
    """(run uuid, chunk, site, command) of every chunk; TemplateError for one a site cannot run."""
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
    catalogue = load_catalogue(catalogue_path(args))
    resources = _resources(args.resources)
    planned = []
    for run in experiment.runs.values():
        for chunk in range(1, experiment.chunking.chunks + 1):
            placement = catalogue.rotation.place(TRAINING_RULE, {"run": run.uuid, "chunk": str(chunk)})
            site = catalogue.sites[placement.site] if placement.site else None
            submit = parse(ChunkTemplate(config["submit_template"], experiment.chunk_vars(run, chunk), resources),
                           site, source)
            requested(submit, ResourceRequest(), site, TRAINING_RULE)
            merge(submit, {})
            planned.append((run.uuid, chunk, site.name if site else "any", command(submit, source)))
    return planned


def plan(args) -> int:
    rows = chunks(args)
    print(f"{'run':<10}{'chunk':>6}  {'site':<12}command")
    for run, chunk, site, argv in rows:
        print(f"{run:<10}{chunk:>6}  {site:<12}{subprocess.list2cmdline(argv)}")
    return 0


def run(args) -> int:
    chunks(args)  # every refusal before anything is submitted
    config = [f"experiment={Path(args.experiment).resolve()}"]
    if args.resources:
        config.append(f"experiment_resources={Path(args.resources).resolve()}")
    snakemake = [str(Path(sys.executable).parent / "snakemake"), "--executor", "htcannex", "--profile", args.profile,
                 "-s", str(WORKFLOW / "Snakefile"), "--config", *config]
    return subprocess.run(snakemake).returncode


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
    parser = nouns.add_parser("experiment", help="plan or run an MLDAG Experiment.yaml")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name, func, help_text in (
        ("plan", plan, "print runs x chunks -> sites and each chunk's command (nothing is submitted)"),
        ("run", run, "run the experiment: snakemake with htcannex and workflows/chunked_training"),
    ):
        verb = verbs.add_parser(name, help=help_text)
        verb.add_argument("experiment", metavar="EXPERIMENT.yaml", help="MLDAG's Experiment.yaml, unchanged")
        verb.add_argument("--profile", required=True, help="Snakemake profile name or directory holding htcannex.yaml")
        verb.add_argument("--resources", metavar="resources.yaml",
                          help="MLDAG's resources.yaml: values for {resource.*} per site, over the catalogue's")
        verb.set_defaults(func=func, htcannex_config=None)

