"""The wire format between pool clients and the daemon: one JSON object per line.

A request is `{"op": NAME, "args": {...}}`; the answer is `{"ok": true,
"result": ...}` or `{"ok": false, "error": MESSAGE, "kind": "request" |
"internal" | "stopping"}` ("stopping": the daemon is exiting; start a new one and retry). ClassAds travel in their text form.
"""
import json

SOCKET_NAME = "pool.sock"
# The serving daemon's pid, in the spool; left behind only by a daemon that did not shut down.
PID_NAME = "daemon.pid"
# AF_UNIX paths are limited to 108 bytes on Linux.
MAX_SOCKET_PATH = 107


def encode(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()


def decode(line: bytes) -> dict:
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("a message must be a JSON object")
    return message


class RequestError(ValueError):
    """A client's request that cannot be carried out; the message says why (the client raises it
    as PoolRequestError)."""
