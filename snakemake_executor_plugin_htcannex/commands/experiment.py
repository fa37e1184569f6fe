"""`htcannex experiment plan | run EXPERIMENT.yaml --profile P [--resources resources.yaml]`: an
MLDAG experiment as its users write it, run by the bundled workflow chunked_training (docs/mldag.md).

`plan` prints every chunk the run would train with the site it lands on and the command it runs,
then the plan's skips, impossible chunks and budget: each chunk is placed by placement.place, the
one judgement `htcannex annex plan`, `snakemake -n` and the run's executor make, with the request
the template makes at each site (a site it cannot run at is skipped, `*`; a chunk no site can run
is `!`, and `plan` then exits 1). Nothing is submitted. It refuses a template that is no submit
description at any site, and a `$(var)` it uses that nothing defines.
`run` makes those refusals, refuses an experiment none of whose chunks can run, then runs the
workflow with Snakemake and htcannex in this directory; options it does not know itself
(`--keep-going`, `-j 4`, `-n`, `--rerun-incomplete`, ...) go to Snakemake.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

from snakemake_executor_plugin_htcannex import bundled, paths
from snakemake_executor_plugin_htcannex.sites.catalogue import HtcannexConfigError, load_catalogue
from snakemake_executor_plugin_htcannex.ops.plan import IMPOSSIBLE_MARK, plan_jobs, render_plan
from snakemake_executor_plugin_htcannex.submit import template
from snakemake_executor_plugin_htcannex.submit.template import ChunkTemplate, TemplateError
from snakemake_executor_plugin_htcannex.commands._common import UsageError, add_verbs, catalogue_path
from snakemake_executor_plugin_htcannex.commands.annex import needed_jobs

WORKFLOW_NAME = "chunked_training"
TRAINING_RULE = "train_chunk"  # the rule the profile's rotation places
BASELINE_RULE = "train_baseline"  # a run's twin, which the profile pins


def workflow_package():
    """The bundled workflow's own package (its scripts/chunked_training, which its Snakefile puts
    on Snakemake's path), loaded from the workflow htcannex ships."""
    if WORKFLOW_NAME not in sys.modules:
        package = bundled.workflow(WORKFLOW_NAME) / "scripts" / WORKFLOW_NAME
        spec = importlib.util.spec_from_file_location(WORKFLOW_NAME, package / "__init__.py",
                                                      submodule_search_locations=[str(package)])
        module = importlib.util.module_from_spec(spec)
        sys.modules[WORKFLOW_NAME] = module
        spec.loader.exec_module(module)
    return sys.modules[WORKFLOW_NAME]


def commands(args) -> dict[tuple[str, str, int], list[str]]:
    """The command of every job by (rule, run uuid, chunk): each chunk's, and each twin's where the
    experiment has a study; $(ResourceName) as template.SITE_TO_BE_PLACED. TemplateError for a
    template that is no submit description whatever the site (what depends on the site, placement
    judges)."""
    workflow_package()
    from chunked_training.experiment import CHUNKED, MLDAG_VARS, load, read, study
    from chunked_training.variables import VarsError

    try:
        source, config = read({"experiment": args.experiment})
        experiment = load(source, config)
        twins = study(source, config)
    except VarsError as error:
        raise TemplateError(str(error)) from None
    if twins:
        try:
            import chunked_training.equivalence  # noqa: F401  the study's scipy and statsmodels
        except ImportError as error:
            raise UsageError(f"{source}: study: {error}") from None
    if not config.get("submit_template"):
        raise TemplateError(f"{source}: no submit_template; an MLDAG experiment has name, submit_template and vars")
    resources = _resources(args.resources)
    text = config["submit_template"]
    first = next(iter(experiment.runs.values()))
    template.undefined_macros(text, {**experiment.chunk_vars(first, 1), **dict.fromkeys(MLDAG_VARS)}, source)
    jobs = {(TRAINING_RULE, run.uuid, chunk): experiment.chunk_vars(run, chunk)
            for run in experiment.runs.values() for chunk in range(1, experiment.chunking.chunks + 1)}
    if twins and twins.twin == CHUNKED:
        jobs |= {(BASELINE_RULE, run.uuid, chunk): experiment.baseline_vars(run, chunk)
                 for run in experiment.runs.values() for chunk in range(1, experiment.chunking.chunks + 1)}
    elif twins:
        jobs |= {(BASELINE_RULE, run.uuid, experiment.chunking.chunks): experiment.baseline_vars(run)
                 for run in experiment.runs.values()}
    argvs = {}
    for key, chunk_vars in jobs.items():
        chunk_vars = chunk_vars | {"ResourceName": template.SITE_TO_BE_PLACED}
        submit = template.parse(ChunkTemplate(text, chunk_vars, resources), None, source)
        template.merge(submit, {})
        argvs[key] = template.command(submit, source)
    return argvs


def placed(args):
    """(the catalogue, every chunk of the experiment a run would train now, placed)."""
    catalogue = load_catalogue(catalogue_path(args))
    jobs = needed_jobs(bundled.workflow(WORKFLOW_NAME) / "Snakefile", Path.cwd(), _config(args),
                       _default_resources(args.profile))
    return catalogue, plan_jobs(catalogue, jobs)


def known_everywhere(args) -> None:
    """Refuse, in one line, a {resource.*} no site of the chunks' rotation knows (template.unknown_everywhere)."""
    workflow_package()
    from chunked_training.experiment import read

    catalogue = load_catalogue(catalogue_path(args))
    text = read({"experiment": args.experiment})[1]["submit_template"]
    sites = [catalogue.sites[name] for name in catalogue.rotation.policy_for(TRAINING_RULE).sites]
    template.unknown_everywhere(text, sites, _resources(args.resources),
                                template.default_values(_default_resources(args.profile)), args.experiment)


def plan(args) -> int:
    argvs = commands(args)
    known_everywhere(args)
    catalogue, planned = placed(args)
    cells = {(job.rule, job.run, job.chunk): job for job in planned}
    twin_jobs = [key for key in argvs if key[0] == BASELINE_RULE]
    chunked_twins = len(twin_jobs) > len({run for _, run, _ in twin_jobs})  # study.twin: chunked
    twin_heading = "twin: the run's chunks, every one pinned" if chunked_twins else "twin: every epoch in one job, pinned"
    for rule, heading in ((TRAINING_RULE, "chunk"), (BASELINE_RULE, twin_heading)):
        rows = [(key, argv) for key, argv in argvs.items() if key[0] == rule and key in cells]
        if rule == TRAINING_RULE or rows:
            print(("" if rule == TRAINING_RULE else f"\n{heading}\n") + f"{'run':<10}{'chunk':>6}  {'site':<12}command")
        for (_, run, chunk), argv in rows:  # a job already done is not run again
            job = cells[rule, run, chunk]
            site = job.decision.site.name if job.decision is not None and job.decision.site is not None else "default"
            line = subprocess.list2cmdline(argv).replace(template.SITE_TO_BE_PLACED, site)
            print(f"{run:<10}{chunk:>6}  {job.cell:<12}{line}")
    if planned:
        from snakemake_executor_plugin_htcannex.annex.ledger import AnnexLedger

        print("\n" + render_plan(catalogue, planned, AnnexLedger(paths.annex_ledger()).spent_core_hours()))
    impossible = [job for job in cells.values() if job.cell == IMPOSSIBLE_MARK]
    if impossible:
        print(f"\n{len(impossible)} of {len(cells)} jobs cannot run (marked {IMPOSSIBLE_MARK}, reasons above)",
              file=sys.stderr)
        if not chunked_twins and any(job.rule == BASELINE_RULE for job in impossible):
            print("a twin longer than the pinned annex's lifetime can train in the "
                  "run's chunks, every one on the pinned site: `twin: chunked` under study:", file=sys.stderr)
    return 1 if impossible else 0


def run(args) -> int:
    commands(args)  # every refusal before anything is submitted
    known_everywhere(args)
    _, planned = placed(args)
    chunks = [job for job in planned if job.rule == TRAINING_RULE]
    if chunks and all(job.cell == IMPOSSIBLE_MARK for job in chunks):
        raise UsageError(f"none of the {len(chunks)} chunks can run at any site of rule {TRAINING_RULE}'s "
                         f"rotation; nothing was submitted. `htcannex experiment plan {args.experiment} --profile "
                         f"{args.profile}` says why for each")
    extra, users_config = _split_config(args.extra)
    config = [*users_config, *(f"{key}={value}" for key, value in _config(args).items())]
    snakemake = [sys.executable, "-m", "snakemake", "--executor", "htcannex", "--profile", args.profile,
                 "-s", str(bundled.workflow(WORKFLOW_NAME) / "Snakefile"), *extra, "--config", *config]
    return subprocess.run(snakemake).returncode


def _split_config(extra: list[str]) -> tuple[list[str], list[str]]:
    """(Snakemake's other options, the KEY=VALUE items of the user's --config/-C): Snakemake keeps
    only the last --config it is given, and run gives its own, so the user's join it
    (`--config allow_not_equivalent=true`)."""
    others, items, taking = [], [], False
    for word in extra:
        if word in ("--config", "-C"):
            taking = True
        elif word.startswith("--config="):
            items.append(word.removeprefix("--config="))
            taking = True
        elif taking and not word.startswith("-"):
            items.append(word)
        else:
            taking = False
            others.append(word)
    return others, items


def _config(args) -> dict:
    """The workflow's config for this experiment (Snakemake's --config)."""
    config = {"experiment": str(Path(args.experiment).resolve())}
    if args.resources:
        config["experiment_resources"] = str(Path(args.resources).resolve())
    return config


def _default_resources(profile: str) -> dict:
    """The profile's default-resources, which a run's jobs get (and so a template's {resource.*})."""
    from snakemake.cli import get_profile_dir
    import yaml

    found = get_profile_dir(profile)
    if found is None:
        return {}
    settings = yaml.safe_load(found[1].read_text()) or {}
    defaults = settings.get("default-resources") or {}
    if isinstance(defaults, list):  # the command line's form: [name=value, ...]
        defaults = dict(item.split("=", 1) for item in defaults)
    return defaults


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
        ("plan", plan, "print runs x chunks -> sites and each chunk's command (nothing is submitted); "
                       "exit 1 if a chunk cannot run"),
        ("run", run, "run the experiment: snakemake with htcannex and the bundled chunked_training; "
                     "other options (--keep-going, -j N, -n, --rerun-incomplete, ...) go to snakemake"),
    ))
    for verb in verbs.values():
        verb.add_argument("experiment", metavar="EXPERIMENT.yaml", help="MLDAG's Experiment.yaml, unchanged")
        verb.add_argument("--profile", required=True, help="Snakemake profile name or directory holding htcannex.yaml")
        verb.add_argument("--resources", metavar="resources.yaml",
                          help="MLDAG's resources.yaml: values for {resource.*} per site, over the catalogue's")
        verb.set_defaults(htcannex_config=None)
    verbs["run"].set_defaults(pass_through=True)
