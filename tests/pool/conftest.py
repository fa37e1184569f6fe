"""Fixtures for the embedded pool's tests: a real daemon per test, always stopped."""
from pathlib import Path

import pytest

from pool_helpers import make_pool, stop_for_sure


@pytest.fixture
def spool(tmp_path_factory) -> Path:
    # Short paths: a Unix socket path must stay under 108 bytes.
    return tmp_path_factory.mktemp("spool")


@pytest.fixture
def pool(spool):
    started = make_pool(spool)
    started.ensure_running()
    yield started
    stop_for_sure(started)


@pytest.fixture
def submit_dir(tmp_path, monkeypatch) -> Path:
    """The submitter's working directory (relative paths in submits resolve here)."""
    directory = tmp_path / "submit"
    directory.mkdir()
    monkeypatch.chdir(directory)
    return directory
