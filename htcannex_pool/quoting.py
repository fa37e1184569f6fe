"""HTCondor's `arguments` and `environment` syntaxes, parsed properly.

New syntax (the value is wrapped in double quotes): whitespace separates
items, single quotes group whitespace into one item, `''` inside single quotes
is a literal single quote, and `""` is a literal double quote. Old syntax
(no surrounding double quotes): arguments split on whitespace; environment
entries split on `;`. See the condor_submit manual, "arguments" and
"environment".
"""
import re

# Runs of characters that stand for themselves, outside and inside single quotes.
_PLAIN_RUN = re.compile(r"[^\s'\"]+")
_QUOTED_RUN = re.compile(r"[^'\"]+")
# What an item cannot hold unquoted in the raw new syntax: white space or a single quote.
_NEEDS_QUOTES = re.compile(r"[\s']")


class QuotingError(ValueError):
    """A value that condor_submit would refuse to parse."""


def _is_new_syntax(value: str) -> bool:
    text = value.strip()
    return len(text) >= 2 and text.startswith('"') and text.endswith('"')


def _split_new_syntax(command: str, body: str) -> list[str]:
    items: list[str] = []
    current: list[str] = []
    in_item = False
    in_single = False
    i = 0
    while i < len(body):
        # A run of characters without a quote (or, outside single quotes, a space) is copied as it
        # is: one step for it, not one per character (every job's environment is parsed this way).
        run = (_QUOTED_RUN if in_single else _PLAIN_RUN).match(body, i)
        if run:
            current.append(run.group())
            in_item = True
            i = run.end()
            continue
        char = body[i]
        following = body[i + 1] if i + 1 < len(body) else ""
        if char == '"':
            if following != '"':
                raise QuotingError(
                    f"{command}: a lone double quote inside the quoted value {body!r}; "
                    'write "" for a literal double quote'
                )
            current.append('"')
            in_item = True
            i += 2
            continue
        if in_single:
            if following == "'":  # char is a single quote here
                current.append("'")
                i += 2
                continue
            in_single = False
        elif char == "'":
            in_single = True
            in_item = True
        elif in_item:  # char is a space here
            items.append("".join(current))
            current, in_item = [], False
        i += 1
    if in_single:
        raise QuotingError(f"{command}: unterminated single quote in {body!r}")
    if in_item:
        items.append("".join(current))
    return items


def parse_arguments(value: str) -> list[str]:
    """The argv (after the executable) that `arguments = value` gives the job."""
    if _is_new_syntax(value):
        return _split_new_syntax("arguments", value.strip()[1:-1])
    if '"' in value:
        raise QuotingError(
            f"arguments = {value}: double quotes are only allowed in the new syntax, "
            "where the whole value is enclosed in double quotes"
        )
    return value.split()


def parse_environment(value: str) -> dict[str, str]:
    """The variables that `environment = value` sets for the job."""
    if _is_new_syntax(value):
        entries = _split_new_syntax("environment", value.strip()[1:-1])
    else:
        entries = [entry.strip() for entry in value.split(";") if entry.strip()]
    environment = {}
    for entry in entries:
        name, equals, setting = entry.partition("=")
        if not equals or not name:
            raise QuotingError(f"environment: entry {entry!r} is not NAME=VALUE")
        environment[name] = setting
    return environment


def _quote_item(item: str) -> str:
    """One item in the raw new syntax: a double quote is itself (see join_arguments)."""
    if item and not _NEEDS_QUOTES.search(item):
        return item
    return "'" + item.replace("'", "''") + "'"


def join_arguments(argv: list[str]) -> str:
    """What HTCondor keeps in a job ad's `Arguments` for `argv`: the new syntax's raw form
    (condor_arglist.cpp, append_arg), without the outer double quotes and with a double quote as
    itself (`""` is the submit file's way of writing one inside its quoted value). The match-time
    `$$()` expansion (dollardollar.py) reads this text as the schedd does."""
    return " ".join(_quote_item(item) for item in argv)


def parse_raw_arguments(raw: str) -> list[str]:
    """The argv a job ad's `Arguments` (join_arguments' form) gives the job."""
    return parse_arguments('"' + raw.replace('"', '""') + '"')


def join_environment(environment: dict[str, str]) -> str:
    """What HTCondor keeps in a job ad's `Environment`: its entries in join_arguments' raw form
    (env.cpp, getDelimitedStringV2Raw joins them as arguments)."""
    return join_arguments([f"{name}={value}" for name, value in environment.items()])


def parse_raw_environment(raw: str) -> dict[str, str]:
    """The variables a job ad's `Environment` (join_environment's form) sets."""
    return parse_environment('"' + raw.replace('"', '""') + '"')
