"""job_spec.py: the command a job runs under HTCondor (end to end in tests/ops/test_faults.py)."""
import subprocess

import pytest

from snakemake_executor_plugin_htcannex import paths
from snakemake_executor_plugin_htcannex.job_spec import with_checkpoint_exit


@pytest.mark.parametrize("command, marker, status", [
    ("(exit 1)", "85", 85),  # Snakemake's exit 1 after a checkpointing script: the job exits 85
    ("(exit 3)", None, 3),  # a plain failure keeps its status
    ("true", None, 0),
])
def test_job_exits_with_the_checkpoint_code_its_script_left(tmp_path, command, marker, status):
    if marker:
        (tmp_path / paths.CHECKPOINT_EXIT_MARKER).write_text(marker + "\n")
    result = subprocess.run(["/bin/sh", "-c", with_checkpoint_exit(command)], cwd=tmp_path)
    assert result.returncode == status
    assert not (tmp_path / paths.CHECKPOINT_EXIT_MARKER).exists()  # the restarted job starts clean
