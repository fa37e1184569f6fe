"""Polling until something a pool does asynchronously has happened (tests/ is on sys.path: its
conftest.py sits in a directory without __init__.py)."""
import time


def wait_until(predicate, timeout_s: float = 20.0, what: str = "condition", every_s: float = 0.05):
    """`predicate()`'s first true value; AssertionError naming `what` after `timeout_s`."""
    deadline = time.time() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(every_s)
