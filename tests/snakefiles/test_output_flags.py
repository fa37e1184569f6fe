"""Output flags on plain shell rules behave as with the local executor: protected()
outputs come back read-only, ensure() rejects what it rejects locally, temp() files are removed."""
import pytest

from same_as_local import assert_same_as_local, copy_workflow, run_htcannex, run_local


@pytest.mark.slow
def test_protected_and_temp_outputs(tmp_path, embedded_pool):
    assert_same_as_local("flags", tmp_path, embedded_pool)
    assert oct((tmp_path / "htcannex" / "protected.txt").stat().st_mode & 0o777) == "0o444"


@pytest.mark.slow
def test_snakemakes_own_ensure_workflow_passes_what_local_passes(tmp_path, embedded_pool):
    # Non-empty output and a matching sha256.
    assert_same_as_local("ensure", tmp_path, embedded_pool, "test2.txt", "test3.txt")


@pytest.mark.slow
def test_snakemakes_own_ensure_workflow_fails_what_local_fails(tmp_path, embedded_pool):
    # An empty output and a wrong sha256, each refused.
    targets = ("test.txt", "test4.txt", "--keep-going")
    by_local = run_local(copy_workflow("ensure", tmp_path / "local"), *targets)
    by_htcannex = run_htcannex(copy_workflow("ensure", tmp_path / "htcannex"), embedded_pool, *targets)
    assert by_local.returncode != 0 and by_htcannex.returncode != 0
    for why in ("empty", "checksum"):
        assert why in by_local.stderr.lower() and why in by_htcannex.stderr.lower()
    assert not (tmp_path / "htcannex" / "test.txt").exists() and not (tmp_path / "htcannex" / "test4.txt").exists()
