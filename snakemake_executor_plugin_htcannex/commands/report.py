"""`htcannex report`: the efficiency and provenance report of a run (see report/).

The event log alone gives every figure but the rule/run/chunk/site names; naming
the pool (--profile, --schedd or --pool-dir) adds them from the job ads.
"""
import sys
from pathlib import Path

from humanfriendly.terminal.spinners import Spinner

from snakemake_executor_plugin_htcannex import paths
from snakemake_executor_plugin_htcannex.ops.report import build_report
from snakemake_executor_plugin_htcannex.ops.report.advice import DEFAULT_HEADROOM, DEFAULT_THRESHOLD
from snakemake_executor_plugin_htcannex.ops.report.records import EventLogError, check_readable, count_events
from snakemake_executor_plugin_htcannex.schedd import job_id
from snakemake_executor_plugin_htcannex.sites.site import SiteKind
from snakemake_executor_plugin_htcannex.commands.status import epochs_per_job_from_config
from snakemake_executor_plugin_htcannex.commands._common import UsageError, add_pool_options, open_catalogue_and_pool

AD_PROJECTION = ["ClusterId", "ProcId", "QDate", "HtcannexRule", "HtcannexWildcards", "HtcannexSite",
                 "HtcannexAttempt", "TargetAnnexName", "RequestCpus", "RequestMemory", "RequestDisk", "RequestGPUs"]


def report(args) -> int:
    workdir = Path(args.directory).resolve()
    log = Path(args.log) if args.log else paths.event_log(workdir)
    try:
        check_readable(log)
    except EventLogError as error:
        raise UsageError(str(error)) from error
    ads, budget, annex_core_hours = {}, None, None
    if args.profile or args.htcannex_config or args.schedd or args.pool_dir:
        catalogue, connection = open_catalogue_and_pool(args)
        ads = _ads(connection.schedd)
        if catalogue is not None:
            budget = catalogue.annex.core_hour_budget or None
            annex_core_hours = {name: site.annex_core_hours for name, site in catalogue.sites.items()
                                if site.kind is SiteKind.ANNEX}
    epochs = args.epochs_per_job or epochs_per_job_from_config(workdir / "config" / "config.yaml")
    with Spinner(label=f"reading {log}", total=count_events(log), stream=sys.stderr) as spinner:
        try:
            result = build_report(log, ads, epochs_per_job=epochs, headroom=args.headroom,
                                  threshold=args.threshold, core_hour_budget=budget,
                                  annex_core_hours=annex_core_hours, step=spinner.step)
        except EventLogError as error:
            raise UsageError(str(error)) from error
    # Imported here: matplotlib costs a second, and only the HTML output needs it.
    if args.html or args.figures:
        from snakemake_executor_plugin_htcannex.ops.report import html
        if args.html:
            _write(Path(args.html), html.page(result))
        if args.figures:
            html.write_figures(result, Path(args.figures))
    from snakemake_executor_plugin_htcannex.ops.report import text
    if args.tsv:
        _write(Path(args.tsv), text.tsv(result))
    if args.json:
        _write(Path(args.json), result.to_json())
    print(text.summary(result))
    return 0


def _ads(schedd) -> dict:
    """"cluster.proc" -> [job ads], queue and history (a restarted pool reuses ids)."""
    constraint = "HtcannexRule isnt undefined"
    ads: dict = {}
    for ad in schedd.query(constraint, AD_PROJECTION) + schedd.history(constraint, AD_PROJECTION):
        ads.setdefault(job_id(ad), []).append(ad)
    return ads


def _write(path: Path, content: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror}") from error


def fraction(text: str) -> float:
    """A number from 0 to 1 (argparse names this function in its error)."""
    value = float(text)
    if not 0 <= value <= 1:
        raise ValueError(text)
    return value


def share(text: str) -> float:
    """A number of 0 or more: 0.2 is 20 % more (argparse names this function in its error)."""
    value = float(text)
    if value < 0:
        raise ValueError(text)
    return value


def register(nouns) -> None:
    parser = nouns.add_parser("report", help="efficiency and provenance: what each job used, waited for, "
                                             "moved and where; per site; right-sizing advice")
    parser.add_argument("log", nargs="?", help="the user event log (default: DIRECTORY/.htcannex/jobs.log); "
                                               "a DAGMan/MLDAG nodes.log works too")
    parser.add_argument("--directory", "-d", default=".", help="the run's working directory (default: here)")
    parser.add_argument("--tsv", metavar="FILE", help="write one row per job as TSV")
    parser.add_argument("--json", metavar="FILE", help="write the whole report as JSON")
    parser.add_argument("--html", metavar="FILE", help="write an HTML report with figures")
    parser.add_argument("--figures", metavar="DIR", help="write the figures as PNG files (sites, timeline, "
                                                         "requests) into DIR")
    parser.add_argument("--headroom", type=share, default=DEFAULT_HEADROOM,
                        help=f"suggested request = peak x (1 + HEADROOM) (default: {DEFAULT_HEADROOM})")
    parser.add_argument("--threshold", type=fraction, default=DEFAULT_THRESHOLD,
                        help=f"flag a request whose peak use is below this fraction of it "
                             f"(default: {DEFAULT_THRESHOLD})")
    parser.add_argument("--epochs-per-job", type=int,
                        help="epochs each chunk trains (default: epochs_per_job in config/config.yaml)")
    add_pool_options(parser)
    parser.set_defaults(func=report)
