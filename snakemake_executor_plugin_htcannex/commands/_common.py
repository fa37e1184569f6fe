"""What the `htcannex` verbs share: the options that name the profile and the pool, opening them,
and the errors that are the user's to fix (cli.py prints them as `htcannex NOUN: message`)."""
from pathlib import Path

import htcondor2
from snakemake_interface_common.exceptions import ApiError, WorkflowError

from snakemake_executor_plugin_htcannex.sites.catalogue import HtcannexConfigError, load_catalogue
from snakemake_executor_plugin_htcannex.driver.control import DriverError
from snakemake_executor_plugin_htcannex.ops.report.records import EventLogError
from snakemake_executor_plugin_htcannex.sites.rotation import RotationError
from snakemake_executor_plugin_htcannex.schedd import EMBEDDED, ScheddNotFound, connect
from snakemake_executor_plugin_htcannex.submit.template import TemplateError

POOL_DIR_HELP = "embedded pool spool (default: $HTCANNEX_POOL_DIR or ./.htcannex/pool)"


class UsageError(Exception):
    """A mistake in the command line or the files it names; the message says which."""


# What a verb raises when the command line, a file it names or the pool is not as it must be: each
# message says what and how to fix it, so the user gets the message, not a traceback.
# htcondor2.HTCondorException covers the embedded pool's PoolError; OSError a path that cannot be used.
USER_ERRORS = (UsageError, HtcannexConfigError, RotationError, TemplateError, DriverError, EventLogError,
               WorkflowError, ApiError, ScheddNotFound, htcondor2.HTCondorException, OSError)


def add_verbs(nouns, noun: str, help_text: str, verbs) -> dict:
    """`htcannex NOUN VERB`: the noun's parser and one parser per (name, function, help) verb, each
    running its function; returns name -> the verb's parser, for the options it takes."""
    parser = nouns.add_parser(noun, help=help_text)
    subparsers = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    parsers = {}
    for name, func, verb_help in verbs:
        parsers[name] = subparsers.add_parser(name, help=verb_help)
        parsers[name].set_defaults(func=func)
    return parsers


def add_profile_options(parser, *, required: bool = False) -> None:
    source = parser.add_mutually_exclusive_group(required=required)
    source.add_argument("--profile", help="Snakemake profile name or directory holding htcannex.yaml")
    source.add_argument("--htcannex-config", metavar="FILE", help="the htcannex.yaml to use")


def add_pool_location_options(parser) -> None:
    parser.add_argument("--schedd", help="pool to ask instead of htcannex.yaml's `pool:` (default: local)")
    parser.add_argument("--pool-dir", help=POOL_DIR_HELP)


def add_pool_options(parser) -> None:
    add_profile_options(parser)
    add_pool_location_options(parser)


def catalogue_path(args) -> Path:
    """The htcannex.yaml named by --htcannex-config, or the one in --profile's directory."""
    if args.htcannex_config:
        return Path(args.htcannex_config)
    from snakemake.cli import get_profile_dir  # resolves NAME as `snakemake --profile NAME` does

    found = get_profile_dir(args.profile)
    if found is None:
        raise HtcannexConfigError(args.profile, "--profile", "no such Snakemake profile",
                                  "run `htcannex profiles install`, or give a profile directory")
    return found[0] / "htcannex.yaml"


def open_catalogue_and_pool(args):
    """(the catalogue or None when no profile is named, the connection to its pool). Only looks:
    an embedded pool is started only where one has run before (its spool holds the jobs to show)."""
    catalogue = load_catalogue(catalogue_path(args)) if args.profile or args.htcannex_config else None
    target = args.schedd or (catalogue.pool if catalogue else EMBEDDED)
    return catalogue, connect(target, Path(args.pool_dir) if args.pool_dir else None, create_pool=False)
