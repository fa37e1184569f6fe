"""The status thread's wait for the event log (log_writes.py): a write ends it at once where
inotify watches the log; without writes, or without the log, it lasts its timeout."""
import asyncio
import sys
import threading
import time

import pytest

from snakemake_executor_plugin_htcannex.track.log_writes import LogWrites

TIMEOUT_S = 5.0


def waited(log_writes: LogWrites, write_after_s: float | None = None) -> float:
    """Seconds one wait took, with the log written `write_after_s` into it (by another thread,
    as the schedd's shadow writes it)."""
    async def wait():
        if write_after_s is not None:
            threading.Timer(write_after_s, lambda: log_writes.path.open("a").write("005 (001.000.000)\n")).start()
        started = time.monotonic()
        await log_writes.wait(TIMEOUT_S)
        return time.monotonic() - started
    return asyncio.run(wait())


@pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")
def test_a_write_to_the_log_ends_the_wait_at_once(tmp_path):
    log = tmp_path / "jobs.log"
    log.write_text("")
    log_writes = LogWrites(log)
    try:
        assert waited(log_writes, write_after_s=0.05) < TIMEOUT_S / 2
        assert waited(log_writes, write_after_s=0.05) < TIMEOUT_S / 2  # and the next one, on a new loop
    finally:
        log_writes.close()


def test_without_the_log_the_wait_lasts_its_timeout(tmp_path):
    log_writes = LogWrites(tmp_path / "jobs.log")

    async def wait():
        started = time.monotonic()
        await log_writes.wait(0.2)
        return time.monotonic() - started
    assert asyncio.run(wait()) >= 0.19
