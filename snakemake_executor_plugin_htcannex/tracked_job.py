"""What the executor keeps about one submitted (or adopted) job between status checks.

Its own module because the executor and the handling of held and idle jobs (held_and_idle.py)
both read and change it; Snakemake carries it in the job's SubmittedJobInfo.aux.
"""
import dataclasses
import time
from typing import Optional

from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo

from .description import JobSpec
from .site import Site


@dataclasses.dataclass
class TrackedJob:
    spec: JobSpec
    site: Optional[Site]  # where the rotation sent it (None: any slot)
    held_for_annex: bool  # submitted held until its annex is up
    stderr: Optional[str]  # its stderr file, relative to the submit directory
    prepared_script: Optional[str]  # written for the job (direct_command.py), removed when it is done
    waiting_since: float = dataclasses.field(default_factory=time.time)  # submitted, released or moved
    idle_since: Optional[float] = None  # when an annex job was last seen idle (looked at once per idle timeout)
    tried: set[str] = dataclasses.field(default_factory=set)  # sites it was moved away from

    def due_a_look(self, idle_timeout_s: float, now: float) -> bool:
        """Whether this idle job is looked at now: once per `idle_timeout_s` that it is seen idle."""
        if self.idle_since is None:
            self.idle_since = now
        if now - self.idle_since <= idle_timeout_s:
            return False
        self.idle_since = now
        return True


def tracked(job_info: SubmittedJobInfo) -> TrackedJob:
    return job_info.aux["htcannex"]
