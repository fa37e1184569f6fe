"""Shadow rules run as with the local executor (issue 13.6)."""
import pytest

from same_as_local import assert_same_as_local


@pytest.mark.slow
def test_full_and_minimal_shadow(tmp_path, embedded_pool):
    assert_same_as_local("shadow", tmp_path, embedded_pool)
