"""The conformance suite's backend: every test runs on the embedded pool and, when one is configured,
on a real HTCondor (backends.py)."""
import pytest

from backends import embedded, real_htcondor


@pytest.fixture(params=["embedded", "htcondor"])
def backend(request, tmp_path_factory):
    # A short path: the embedded daemon's Unix socket path is limited to ~100 characters.
    started = (embedded(tmp_path_factory.mktemp("pool")) if request.param == "embedded"
               else real_htcondor(tmp_path_factory.getbasetemp()))
    yield started
    started.stop()
