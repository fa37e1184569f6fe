"""`htcannex why JOB`: why a job is idle or held, in plain words (see diagnose.py)."""
import re
import sys

from snakemake_executor_plugin_htcannex.ops.diagnose import diagnose
from snakemake_executor_plugin_htcannex.secrets import redact
from snakemake_executor_plugin_htcannex.commands._common import UsageError, add_pool_options, open_catalogue_and_pool

JOB_ID = re.compile(r"(\d+)\.(\d+)")


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
    parser.set_defaults(func=why)
