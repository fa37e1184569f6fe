"""`htcannex why JOB`: why a job is idle or held, in plain words (see diagnose.py)."""
import re
import sys
from pathlib import Path

from ..diagnose import diagnose
from ..schedd import EMBEDDED, connect
from ..sites import HtcannexConfigError, load_catalogue
from .annex import catalogue_path

JOB_ID = re.compile(r"(\d+)\.(\d+)")


def why(args) -> int:
    match = JOB_ID.fullmatch(args.job)
    if not match:
        print(f"htcannex why: {args.job!r} is not a job id; give CLUSTER.PROC, e.g. 12.0", file=sys.stderr)
        return 2
    try:
        catalogue = load_catalogue(catalogue_path(args)) if args.profile or args.htcannex_config else None
    except HtcannexConfigError as error:
        print(f"htcannex why: {error}", file=sys.stderr)
        return 2
    target = args.schedd or (catalogue.pool if catalogue else EMBEDDED)
    connection = connect(target, Path(args.pool_dir) if args.pool_dir else None)
    constraint = f"ClusterId == {match[1]} && ProcId == {match[2]}"
    ads = connection.schedd.query(constraint, []) or connection.schedd.history(constraint, [], match=1)
    if not ads:
        print(f"htcannex why: job {args.job} is neither in the queue nor in the history of pool {target}",
              file=sys.stderr)
        return 1
    print("\n".join(diagnose(ads[0], catalogue, connection.collector)))
    return 0


def register(nouns) -> None:
    parser = nouns.add_parser("why", help="why a job is idle or held, and what to change")
    parser.add_argument("job", help="the HTCondor job id, CLUSTER.PROC (htcannex status lists them)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--profile", help="Snakemake profile name or directory holding htcannex.yaml "
                                          "(its sites are analysed even when their annexes are not up)")
    source.add_argument("--htcannex-config", metavar="FILE", help="the htcannex.yaml to use")
    parser.add_argument("--schedd", help="pool to ask instead of htcannex.yaml's `pool:` (default: local)")
    parser.add_argument("--pool-dir", help="embedded pool spool (default: $HTCANNEX_POOL_DIR or ./.htcannex/pool)")
    parser.set_defaults(func=why)
