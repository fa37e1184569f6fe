"""Shared fixtures. Append new fixtures; keep this file small."""
import pytest

from htcannex_pool import Pool


@pytest.fixture
def embedded_pool(tmp_path_factory):
    """A fresh embedded pool in its own spool directory, stopped afterwards."""
    # A short path: the daemon's Unix socket path is limited to ~100 characters.
    pool = Pool(tmp_path_factory.mktemp("pool"), idle_exit_s=300)
    yield pool
    pool.stop()
