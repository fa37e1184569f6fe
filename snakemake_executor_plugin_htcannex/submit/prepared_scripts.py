"""The scripts direct_command.py prepares for jobs (.htcannex/scripts/), removed once no job will run them.

A job's script goes when Snakemake is told the job ended (done, failed, removed after a hold), when
its submission is refused, when an earlier submission of the job is adopted instead, and when Ctrl-C
removes the job from the queue. A Snakemake that was killed (kill -9, a reboot) leaves its jobs'
scripts behind, and some of those jobs are still queued and need theirs: the next run removes, at
its start, every script that no queued job names (HtcannexPreparedScript in its ad), and an adopted
job's script when that job ends. Under --skip-script-cleanup nothing is removed, as Snakemake then
keeps its own prepared scripts too.
"""
import os
from pathlib import Path
from typing import Optional

from snakemake_executor_plugin_htcannex import paths


class PreparedScripts:
    def __init__(self, workdir: Path, cleanup: bool):
        """`cleanup`: Snakemake's execution_settings.cleanup_scripts (False under --skip-script-cleanup)."""
        self._workdir, self._cleanup = Path(workdir), cleanup

    def remove(self, *scripts: Optional[str]) -> None:
        """Remove these scripts (workdir-relative; None: a job without one) once nothing will run them."""
        if not self._cleanup:
            return
        for script in filter(None, scripts):
            (self._workdir / script).unlink(missing_ok=True)

    def present(self) -> list[str]:
        """The prepared scripts here (workdir-relative), to look at at a run's start; none under
        --skip-script-cleanup, where none are removed."""
        directory = paths.job_scripts_dir(self._workdir)
        if not self._cleanup or not directory.is_dir():
            return []
        return sorted(os.path.relpath(script, self._workdir) for script in directory.iterdir() if script.is_file())
