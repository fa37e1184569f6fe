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
    idle_since: Optional[float] = None  # when it was last seen idle (looked at once per idle timeout)
    first_looked: bool = False  # given its first look, a negotiation cycle after it was first seen idle
    tried: set[str] = dataclasses.field(default_factory=set)  # sites it was moved away from

    def due_a_first_look(self, after_s: float, idle_timeout_s: float, now: float) -> bool:
        """Whether this idle job gets its first look now: once, `after_s` after it was first seen idle,
        when that comes before its first look at the idle timeout (due_a_look)."""
        if self.first_looked or self.idle_since is None or after_s >= idle_timeout_s or now - self.idle_since <= after_s:
            return False
        self.first_looked = True
        return True

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
