"""`htcannex why JOB`: why a job is idle or held, in plain words (see diagnose.py).

Also holds what `why` and `status` share: the options that name the profile and the
pool, and opening them.
"""
import re
import sys
from pathlib import Path

from ..diagnose import diagnose
from ..schedd import EMBEDDED, connect
from ..secrets import redact
from ..catalogue import HtcannexConfigError, load_catalogue
from .annex import catalogue_path

JOB_ID = re.compile(r"(\d+)\.(\d+)")


class UsageError(Exception):
    """A mistake in the command line or the files it names; the message says which."""


def add_pool_options(parser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--profile", help="Snakemake profile name or directory holding htcannex.yaml")
    source.add_argument("--htcannex-config", metavar="FILE", help="the htcannex.yaml to use")
    parser.add_argument("--schedd", help="pool to ask instead of htcannex.yaml's `pool:` (default: local)")
    parser.add_argument("--pool-dir", help="embedded pool spool (default: $HTCANNEX_POOL_DIR or ./.htcannex/pool)")


def open_catalogue_and_pool(args):
    """(the catalogue or None when no profile is named, the connection to its pool)."""
    try:
        catalogue = load_catalogue(catalogue_path(args)) if args.profile or args.htcannex_config else None
    except HtcannexConfigError as error:
        raise UsageError(str(error)) from error
    target = args.schedd or (catalogue.pool if catalogue else EMBEDDED)
    return catalogue, connect(target, Path(args.pool_dir) if args.pool_dir else None)


def reporting_usage_errors(noun: str, func):
    """`func`, printing a UsageError as `htcannex NOUN: message` with exit status 2."""
    def run(args) -> int:
        try:
            return func(args)
        except UsageError as error:
            print(f"htcannex {noun}: {error}", file=sys.stderr)
            return 2
    return run


def why(args) -> int:
    match = JOB_ID.fullmatch(args.job)
    if not match:
        raise UsageError(f"{args.job!r} is not a job id; give CLUSTER.PROC, e.g. 12.0")
    catalogue, connection = open_catalogue_and_pool(args)
    constraint = f"ClusterId == {match[1]} && ProcId == {match[2]}"
    ads = connection.schedd.query(constraint, []) or connection.schedd.history(constraint, [], match=1)
    if not ads:
        print(f"htcannex why: job {args.job} is neither in the queue nor in the history of that pool",
              file=sys.stderr)
        return 1
    print(redact("\n".join(diagnose(ads[0], catalogue, connection.collector))))
    return 0


def register(nouns) -> None:
    parser = nouns.add_parser("why", help="why a job is idle or held, and what to change")
    parser.add_argument("job", help="the HTCondor job id, CLUSTER.PROC (htcannex status lists them)")
    add_pool_options(parser)
    parser.set_defaults(func=reporting_usage_errors("why", why))
