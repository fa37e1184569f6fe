"""What the executor keeps about one submitted (or adopted) job between status checks.

Its own module because the executor and the handling of held and idle jobs (held_and_idle.py)
both read and change it; Snakemake carries it in the job's SubmittedJobInfo.aux.
"""
import dataclasses
import time
from typing import Optional

from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo

from snakemake_executor_plugin_htcannex.submit.description import JobSpec
from snakemake_executor_plugin_htcannex.sites.site import Site


@dataclasses.dataclass
class TrackedJob:
    spec: JobSpec
    site: Optional[Site]  # where the rotation sent it (None: any slot)
    held_for_annex: bool  # submitted held until its annex is up
    stderr: Optional[str]  # its stderr file, relative to the submit directory
    prepared_script: Optional[str]  # written for the job (direct_command.py), removed when it is done
    waiting_since: float = dataclasses.field(default_factory=time.time)  # submitted, released or moved
    idle_since: Optional[float] = None  # first seen idle since it last ran, or last looked at (once per idle timeout)
    first_looked: bool = False  # given its first look, a negotiation cycle after it was first seen idle
    tried: set[str] = dataclasses.field(default_factory=set)  # sites it was moved away from
    rescheduled: bool = False  # the schedd was asked once more to start it (waiting.RESCHEDULE_AFTER_S)

    def first_look_due(self, after_s: float, idle_timeout_s: float, now: float) -> bool:
        """Whether this idle job is due its first look: once, `after_s` after it was first seen idle,
        when that comes before its first look at the idle timeout (look_due)."""
        return (not self.first_looked and self.idle_since is not None and after_s < idle_timeout_s
                and now - self.idle_since > after_s)

    def look_due(self, idle_timeout_s: float, now: float) -> bool:
        """Whether this idle job is due a look: once per `idle_timeout_s` that it is seen idle."""
        return self.idle_since is not None and now - self.idle_since > idle_timeout_s

    def due_a_first_look(self, after_s: float, idle_timeout_s: float, now: float) -> bool:
        """first_look_due, and if so it is given now."""
        if not self.first_look_due(after_s, idle_timeout_s, now):
            return False
        self.first_looked = True
        return True

    def seen_running(self) -> None:
        """Running now: if it is idle again later (evicted, preempted, its annex expired), its time seen idle
        starts then, not at the idle spell before it ran."""
        self.idle_since = None

    def due_a_look(self, idle_timeout_s: float, now: float) -> bool:
        """look_due, and if so it is given now; the first call starts the job's time seen idle."""
        if self.idle_since is None:
            self.idle_since = now
        if not self.look_due(idle_timeout_s, now):
            return False
        self.idle_since = now
        return True


def tracked(job_info: SubmittedJobInfo) -> TrackedJob:
    return job_info.aux["htcannex"]
