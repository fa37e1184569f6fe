"""Keep tokens and passwords out of submit descriptions, logs and error messages.

A value in a job's `environment` is not private: the schedd stores it in the
job ad, which `condor_q -l`, the history file and the embedded pool's spool
keep for everyone with access to the access point. So variables whose name says
they hold a secret (BEARER_TOKEN, *_PASSWORD, *_SECRET, *_API_KEY, ...) are
withheld from jobs; a job gets a token the HTCondor way, as a file
(BEARER_TOKEN_FILE, `use_oauth_services`, or a transferred token file), whose
*path* is not a secret.

`redact(text)` masks what slipped through in a message: the values of such
variables in this process's environment, `NAME=value` pairs with a secret
name (`authz=` too: a URL's token query), and bearer tokens (JWTs) wherever
they appear.
"""
import functools
import os
import re
from collections.abc import Mapping

MASK = "[REDACTED]"
# Names that hold a secret; *_FILE variables hold a path to one, which is fine to pass.
_SECRET_WORDS = "TOKEN|PASSWORD|PASSWD|SECRET|API_?KEY|ACCESS_KEY|CREDENTIAL|PRIVATE_KEY|AUTHZ"
SECRET_NAME = re.compile(rf"(?i)(?:{_SECRET_WORDS})")
_SECRET_WORD = re.compile(_SECRET_WORDS)  # in upper-cased ASCII text (contains_secret)
_NAME = rf"(?P<name>[A-Z0-9_]*(?:{_SECRET_WORDS})[A-Z0-9_]*)"
_VALUE = r"['\"]?(?P<value>[^\s'\",;]+)"
# A secret-named key with its value: `NAME=value` anywhere (an environment, a URL query), and
# `"name": value` or `name: value` only as a quoted or line-leading key (JSON, YAML). The name is a
# whole word, not part of a path (/etc/passwd) or a longer name; a prose `rule make_secret: exited` is
# no key, and a value never starts on the next line.
SECRET_PAIRS = (
    re.compile(rf"(?i)(?<![\w/.\-]){_NAME}['\"]?[ \t]*=[ \t]*{_VALUE}"),
    re.compile(rf"(?im)(?:(?<=['\"])|^[ \t]*(?:- )?){_NAME}['\"]?[ \t]*:[ \t]*{_VALUE}"),
)
JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
SHORTEST_SECRET = 6  # shorter values ("1", "yes") would mask ordinary words


def is_secret_name(name: str) -> bool:
    """BEARER_TOKEN, DB_PASSWORD, ...; not BEARER_TOKEN_FILE (a path)."""
    return bool(SECRET_NAME.search(name)) and not name.upper().endswith("FILE")


def withhold(environment: Mapping[str, str]) -> tuple[dict, list[str]]:
    """(the environment without secret variables, the names withheld)."""
    kept = {name: value for name, value in environment.items() if not is_secret_name(name)}
    return kept, sorted(set(environment) - set(kept))


def withheld_warning(names: list[str]) -> str:
    return (f"not passing {', '.join(names)} to jobs: a job's environment is stored in its job ad "
            "(the queue, the history, the pool spool), readable by others. Give jobs a token file "
            "instead: BEARER_TOKEN_FILE pointing at a file transferred with the job, or HTCondor's "
            "credential service (submit command use_oauth_services).")


def secret_values(environment: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Values of secret-named variables (this process's environment by default), longest first."""
    environment = os.environ if environment is None else environment
    return _secret_values(tuple(environment.items()))


@functools.lru_cache(maxsize=4)
def _secret_values(items: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    # Cached: every submit value of every job is checked against the same environment, and
    # testing each name with SECRET_NAME cost more than the check itself.
    values = {value for name, value in items if is_secret_name(name) and len(value) >= SHORTEST_SECRET}
    return tuple(sorted(values, key=len, reverse=True))


def contains_secret(text: str, values: tuple[str, ...]) -> bool:
    """Whether `text` holds one of `values` (secret_values()) or a secret-looking pair or token."""
    if any(value in text for value in values):
        return True
    # A secret-looking pair names a secret word and a token starts with eyJ: ASCII text with neither (a
    # job's ~20 submit values, nearly always) needs no substitution. Upper-cased, ASCII text matches the
    # words as SECRET_NAME's (?i) does, at a fifth of its cost.
    if text.isascii() and not _SECRET_WORD.search(text.upper()) and "eyJ" not in text:
        return False
    return _masked(text, ()) != text


def redact(text: object, environment: Mapping[str, str] | None = None) -> str:
    """`text` with every secret it contains replaced by [REDACTED]."""
    return _masked(str(text), secret_values(environment))


def _masked(text: str, values: tuple[str, ...]) -> str:
    for value in values:
        text = text.replace(value, MASK)
    for pair in SECRET_PAIRS:
        text = pair.sub(lambda m: m[0][:m.start("value") - m.start()] + MASK if is_secret_name(m["name"]) else m[0],
                        text)
    return JWT.sub(MASK, text)
