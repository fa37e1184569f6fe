"""job_spec.py: the command a job runs under HTCondor (end to end in tests/ops/test_faults.py)."""
import subprocess

import pytest

from snakemake_executor_plugin_htcannex import paths
from snakemake_executor_plugin_htcannex.submit.job_spec import with_checkpoint_exit


@pytest.mark.parametrize("command, status", [
    # Snakemake's exit 1 after a checkpointing script: the job exits 85
    (f"echo 85 > ${paths.CHECKPOINT_EXIT_MARKER_VARIABLE}; (exit 1)", 85),
    ("(exit 3)", 3),  # a plain failure keeps its status
    ("true", 0),
])
def test_job_exits_with_the_checkpoint_code_its_script_left(tmp_path, command, status):
    result = subprocess.run(["/bin/sh", "-c", with_checkpoint_exit(command)], cwd=tmp_path)
    assert result.returncode == status
    assert not (tmp_path / paths.CHECKPOINT_EXIT_MARKER).exists()


def test_a_restart_in_the_same_sandbox_is_not_fooled_by_the_marker_of_the_run_before(tmp_path):
    # A rule's shell command run without Snakemake exits 85 itself: the wrapper's end never runs and
    # the marker stays in the sandbox, where HTCondor restarts the job.
    checkpointing = with_checkpoint_exit(f"echo 85 > ${paths.CHECKPOINT_EXIT_MARKER_VARIABLE}; exit 85")
    assert subprocess.run(["/bin/sh", "-c", checkpointing], cwd=tmp_path).returncode == 85
    assert subprocess.run(["/bin/sh", "-c", with_checkpoint_exit("true")], cwd=tmp_path).returncode == 0
