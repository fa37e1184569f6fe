"""`htcannex NOUN [VERB]`: the operator's command line.

Each noun lives in its own module under `commands/` and exposes
`register(subparsers)`, which adds its parser and sets `func` to the callable
that runs it (returning an exit status). New nouns need no change here.
Modules named `_*` there are the nouns' shared helpers, not nouns. An error that is the user's
to fix (commands._common.USER_ERRORS) is printed as `htcannex NOUN [VERB]: message`, exit status 2.
"""
import argparse
import importlib
import pkgutil
import sys

from snakemake_executor_plugin_htcannex import commands
from snakemake_executor_plugin_htcannex.commands._common import USER_ERRORS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="htcannex",
        description="Operate htcannex: the embedded pool, profiles, run status, diagnoses.",
    )
    nouns = parser.add_subparsers(dest="noun", metavar="NOUN", required=True)
    for module_info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{module_info.name}")
        module.register(nouns)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # A noun that passes arguments on (`submit` to Snakemake) gets the ones it does not know.
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "pass_through", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    try:
        return args.func(args) or 0
    except USER_ERRORS as error:
        command = " ".join(filter(None, (args.noun, getattr(args, "verb", None))))
        print(f"htcannex {command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130  # Ctrl-C: the shell's status for SIGINT, without a traceback


if __name__ == "__main__":
    sys.exit(main())
