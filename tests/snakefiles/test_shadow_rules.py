"""Shadow rules run as with the local executor, on Snakemake's own test_shadow."""
import pytest

from same_as_local import assert_same_as_local


@pytest.mark.slow
def test_snakemakes_own_shadow_workflow(tmp_path, embedded_pool):
    # shallow, full (the job's sandbox is also its TMPDIR) and a protected output in a shadow.
    assert_same_as_local("shadow", tmp_path, embedded_pool, "simple_shallow.out", "simple_full.out", "protected.out")
