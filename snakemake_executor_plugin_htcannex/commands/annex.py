"""`htcannex annex plan | create | list`: which chunk goes where; create a site's annex by hand; the annexes
this directory requested and what of them is up now.

`plan` prints only the plan (run x chunk -> site, skips and impossible jobs with their reasons,
the plan as a budget) that `snakemake -n` ends with (through the htcannex logger plugin) and every
real run starts with. `create` requests one site's annex within the guards; for a `create: manual`
site it prints the steps to bring it up by hand (on the embedded pool it plays them).
"""
from pathlib import Path

from snakemake_executor_plugin_htcannex import paths
from snakemake_executor_plugin_htcannex.ops.plan import plan_report
from snakemake_executor_plugin_htcannex.sites.catalogue import HtcannexConfigError, load_catalogue
from snakemake_executor_plugin_htcannex.commands._common import UsageError, add_pool_location_options, add_profile_options, add_verbs, catalogue_path


def needed_jobs(snakefile: Path, workdir: Path, config: dict | None = None,
                default_resources: dict | None = None) -> list[tuple[str, dict, dict, int]]:
    """(rule, wildcards, resources, threads) of every job a run would execute now (with `config`
    as from --config, and a profile's `default_resources`)."""
    from snakemake.api import SnakemakeApi
    from snakemake.resources import Resources
    from snakemake.settings.types import ConfigSettings, OutputSettings, Quietness, ResourceSettings

    defaults = (Resources.parser_factory(defaults="full", allow_expressions=True)(
        [f"{name}={value}" for name, value in default_resources.items()]) if default_resources else None)
    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=1, default_resources=defaults),
            config_settings=ConfigSettings(config=config or {}),
            snakefile=snakefile, workdir=workdir
        )
        workflow_api.dag()
        # Snakemake's API has no public job listing; these are the two steps its
        # own dry run takes before scheduling.
        workflow = workflow_api._workflow
        workflow._prepare_dag(forceall=False, ignore_incomplete=False, lock_warn_only=True, nolock=True)
        workflow._build_dag()
        return [(job.rule.name, dict(job.wildcards_dict), dict(job.resources.items()), job.threads)
                for job in workflow.dag.needrun_jobs()]


def plan(args) -> int:
    catalogue = load_catalogue(catalogue_path(args))
    snakefile = Path(args.snakefile).resolve()
    if not snakefile.is_file():
        raise UsageError(f"no Snakefile at {snakefile}: run this where the workflow's Snakefile is, "
                         "or name it with -s PATH")
    from snakemake_executor_plugin_htcannex.annex.ledger import AnnexLedger

    report = plan_report(catalogue, needed_jobs(snakefile, Path.cwd()),
                         AnnexLedger(paths.annex_ledger()).spent_core_hours())
    print(report or "nothing to place: no job of a rotated rule needs to run "
          f"(rotated rules: {', '.join(catalogue.rotation.rules) or 'none'})")
    return 0


def create(args) -> int:
    from snakemake_executor_plugin_htcannex.annex.backends import backend_for
    from snakemake_executor_plugin_htcannex.annex.ledger import AnnexLedger
    from snakemake_executor_plugin_htcannex.annex.manager import AnnexManager
    from snakemake_executor_plugin_htcannex.schedd import connect

    path = catalogue_path(args)
    catalogue = load_catalogue(path)
    if args.site not in catalogue.sites:
        raise HtcannexConfigError(path, f"sites.{args.site}", "no such site",
                                  f"name one of {', '.join(catalogue.sites)}")
    site = catalogue.sites[args.site]
    connection = connect(args.schedd or catalogue.pool, Path(args.pool_dir) if args.pool_dir else None)
    backend = backend_for(connection, path)
    # Guards and the ledger apply as in a run: a request made here is one the
    # executor will not repeat, and it counts against the budget.
    if site.manual and connection.embedded:
        backend.create(site)  # the embedded pool plays the execute point started by hand
        print(f"started annex {site.annex_name} by hand (not charged to the budget)")
        return 0
    manager = AnnexManager(connection.collector, backend, AnnexLedger(paths.annex_ledger()),
                           catalogue.annex, mode="auto")
    print(manager.ensure(site).message or f"annex {site.annex_name} is up")
    return 0


def list_annexes(args) -> int:
    """Each annex request of this directory's ledger (when, what it cost, whether it has ended) beside the
    annex's slots in the collector now: a real annex's node is a partitionable slot, each job on it a
    dynamic one."""
    import time
    from datetime import datetime, timezone

    import htcondor2

    from snakemake_executor_plugin_htcannex.annex.ledger import AnnexLedger
    from snakemake_executor_plugin_htcannex.schedd import connect

    path = catalogue_path(args)
    catalogue = load_catalogue(path)
    connection = connect(args.schedd or catalogue.pool, Path(args.pool_dir) if args.pool_dir else None,
                         create_pool=False)
    nodes: dict[str, int] = {}
    jobs: dict[str, int] = {}
    for slot in connection.collector.query(htcondor2.AdTypes.Startd, constraint="AnnexName isnt undefined",
                                           projection=["AnnexName", "SlotType", "State"]):
        name = slot["AnnexName"]
        dynamic = slot.get("SlotType") == "Dynamic"
        nodes[name] = nodes.get(name, 0) + (not dynamic)
        jobs[name] = jobs.get(name, 0) + (dynamic or (slot.get("State") == "Claimed"
                                                      and slot.get("SlotType") != "Partitionable"))
    requests = AnnexLedger(paths.annex_ledger()).requests()
    now = time.time()
    rows = [("ANNEX", "SITE", "REQUESTED (UTC)", "CORE-HOURS", "REQUEST", "NOW")]
    for request in requests:
        when = datetime.fromtimestamp(request.requested_at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        state = "live" if request.live(now) else "ended" if request.ended_at is not None else "expired"
        up = f"up: {nodes[request.name]} node(s), {jobs[request.name]} job(s)" if request.name in nodes else "not up"
        rows.append((request.name, request.site, when, f"{request.core_hours:g}", state, up))
    for name in sorted(set(nodes) - {request.name for request in requests}):
        rows.append((name, "-", "-", "-", "not requested here", f"up: {nodes[name]} node(s), {jobs[name]} job(s)"))
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    spent = sum(request.core_hours for request in requests)
    print(f"{spent:g} of core_hour_budget {catalogue.annex.core_hour_budget:g} core-hours spent from this directory")
    return 0


def register(nouns) -> None:
    verbs = add_verbs(nouns, "annex", "rotation plan; create an annex by hand", (
        ("plan", plan, "print which site each run's chunks go to (nothing is submitted)"),
        ("create", create, "create one site's annex now, within the profile's guards"),
        ("list", list_annexes, "the annexes this directory requested, and which are up now"),
    ))
    for verb in verbs.values():
        add_profile_options(verb, required=True)
    verbs["plan"].add_argument("-s", "--snakefile", default="Snakefile", help="default: %(default)s")
    create_parser = verbs["create"]
    create_parser.add_argument("site", help="a site of htcannex.yaml")
    add_pool_location_options(create_parser)
    add_pool_location_options(verbs["list"])

