"""What an ``osdf`` query may look like, and the object path it names.

A query is an HTCondor-style OSDF URL with an empty host: ``osdf:///<namespace>/<path>``.
The object path (``/<namespace>/<path>``) is the same string the federation, a local
origin directory and HTCondor's ``transfer_input_files`` use, so one query means one
object everywhere.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

SCHEME = "osdf://"

# Characters that would break the submit file this URL ends up in: HTCondor splits
# transfer_input_files on commas and whitespace, transfer_output_remaps on ';' and '='.
_FORBIDDEN = re.compile(r"[\s,;=\"'\\]")


class InvalidQuery(ValueError):
    pass


def object_path(query: str) -> str:
    """``osdf:///ospool/ap40/x`` -> ``/ospool/ap40/x``; InvalidQuery says what is wrong."""
    if not query.startswith(SCHEME):
        raise InvalidQuery(
            f"{query!r} is not an OSDF URL: write osdf:///<namespace>/<path> "
            "(three slashes, as in an HTCondor submit file)"
        )
    rest = query[len(SCHEME) :]
    if not rest.startswith("/"):
        raise InvalidQuery(
            f"{query!r} has a host part ({rest.split('/', 1)[0]!r}); OSDF URLs have "
            "none: write osdf:///<namespace>/<path> (three slashes)"
        )
    if "?" in rest or "#" in rest:
        raise InvalidQuery(
            f"{query!r} carries a query string or fragment; tokens and options belong "
            "in the storage settings, not in the URL"
        )
    bad = _FORBIDDEN.search(rest)
    if bad:
        raise InvalidQuery(
            f"{query!r} contains {bad.group()!r}, which HTCondor's transfer lists cannot "
            "carry; rename the object"
        )
    parts = rest.split("/")[1:]
    if len(parts) < 2 or any(part in ("", ".", "..") for part in parts):
        raise InvalidQuery(
            f"{query!r} must name an object below a namespace "
            "(osdf:///<namespace>/<path>) without empty, '.' or '..' parts"
        )
    return rest


def basename(query: str) -> str:
    return PurePosixPath(object_path(query)).name
