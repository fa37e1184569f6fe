"""Find the bearer token for the federation, the way OSDF clients do.

pelicanfs already knows the usual places (an explicit file, ``BEARER_TOKEN``,
``BEARER_TOKEN_FILE``, ``$XDG_RUNTIME_DIR/bt_u$UID`` or ``/tmp/bt_u$UID``, ``TOKEN``,
HTCondor's ``$_CONDOR_CREDS/*.use``); we walk its iterator but leave out its last
resort, the interactive OIDC device flow, which would hang a batch job.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator, Optional


# pelicanfs's logger; at DEBUG its discovery prints the start of a token it found
_PELICAN_LOGGER = logging.getLogger("fsspec.pelican")


@contextlib.contextmanager
def _pelican_debug_muted() -> Iterator[None]:
    level = _PELICAN_LOGGER.level
    _PELICAN_LOGGER.setLevel(max(_PELICAN_LOGGER.getEffectiveLevel(), logging.INFO))
    try:
        yield
    finally:
        _PELICAN_LOGGER.setLevel(level)


def discover_token(token_file: Optional[str] = None) -> Optional[str]:
    with _pelican_debug_muted():
        return _first_token(token_file)


def _first_token(token_file: Optional[str]) -> Optional[str]:
    # Imported here, as in pelican.py: only the pelican backend pays for pelicanfs.
    from pelicanfs.token_content_iterator import TokenContentIterator, TokenDiscoveryMethod

    candidates = TokenContentIterator(location=token_file)
    candidates.methods = [
        method
        for method in candidates.methods
        if method is not TokenDiscoveryMethod.OIDC_DEVICE_FLOW
    ]
    # pelicanfs looks in $_CONDOR_CREDS only for a token it has a name for (from the
    # namespace's issuer); we have none, so offer it every *.use there, scitokens first.
    candidates.cred_locations = candidates.discoverHTCondorTokenLocations("")
    return next(candidates, None)


def redact(text: str, token: Optional[str]) -> str:
    """``text`` with the token replaced, for every message that leaves this package."""
    return text.replace(token, "<token>") if token else text
