"""Find the bearer token for the federation, the way OSDF clients do.

pelicanfs already knows the usual places (an explicit file, ``BEARER_TOKEN``,
``BEARER_TOKEN_FILE``, ``$XDG_RUNTIME_DIR/bt_u$UID`` or ``/tmp/bt_u$UID``, ``TOKEN``,
HTCondor's ``$_CONDOR_CREDS/*.use``); we walk its iterator but leave out its last
resort, the interactive OIDC device flow, which would hang a batch job.
"""

from __future__ import annotations

from typing import Optional

from pelicanfs.token_content_iterator import TokenContentIterator, TokenDiscoveryMethod


def discover_token(token_file: Optional[str] = None) -> Optional[str]:
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
