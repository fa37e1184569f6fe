"""What the executor keeps about one submitted (or adopted) job between status checks, and what it
is waiting on.

Its own module because the executor's status check (status_check.py) and the handling of waiting
jobs (waiting.py) both read and change it; Snakemake carries it in the job's SubmittedJobInfo.aux.
"""
import dataclasses
import enum
import time
from typing import Optional

from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo

from snakemake_executor_plugin_htcannex.sites.placement import Request
from snakemake_executor_plugin_htcannex.sites.site import ResourceRequest, Site
from snakemake_executor_plugin_htcannex.submit.description import JobSpec
from snakemake_executor_plugin_htcannex.submit.request import job_request


class WaitingOn(enum.Enum):
    """What a tracked job waits on before it can run."""

    NOTHING = "nothing"  # running, or queued and not yet seen waiting
    ANNEX = "its annex"  # queued on hold by htcannex until its site's annex is up
    SLOT = "a slot"  # idle in the queue
    RELEASE = "a release"  # held by HTCondor: the hold policy releases it, or it fails


@dataclasses.dataclass
class TrackedJob:
    spec: JobSpec
    site: Optional[Site]  # where the rotation sent it (None: any slot)
    waiting_on: WaitingOn
    stderr: Optional[str]  # its stderr file, relative to the submit directory
    prepared_script: Optional[str]  # written for the job (direct_command.py), removed when it is done
    # What placement judged it by (submit/request.py), kept for a move to another site; made again
    # for a job adopted from an earlier run, whose request was not judged in this one.
    request: Optional[Request] = None
    # Its request as its site admitted it: what it asks a slot for (None for an adopted job).
    admitted: Optional[ResourceRequest] = None
    submitted: float = dataclasses.field(default_factory=time.time)  # queued, or adopted
    # When its wait began (submitted, released, moved, first seen idle) or it was last looked at.
    since: float = dataclasses.field(default_factory=time.time)
    first_looked: bool = False  # given its first look in this wait, a negotiation cycle after it began
    tried: set[str] = dataclasses.field(default_factory=set)  # sites it was moved away from
    rescheduled: bool = False  # the schedd was asked once more to start it (waiting.RESCHEDULE_AFTER_S)

    def placement_request(self) -> Request:
        """What placement judges it by, for a move to another site of its rotation."""
        if self.request is None:
            self.request = job_request(self.spec.rule, self.spec.resources, self.spec.threads)
        return self.request

    def wait_for(self, what: WaitingOn, now: float) -> None:
        """It waits on `what` now; a new wait starts its clock and its looks afresh."""
        if self.waiting_on is not what:
            self.waiting_on, self.since, self.first_looked = what, now, False

    def seen_running(self) -> None:
        """Running now: if it is idle again later (evicted, preempted, its annex expired), its time seen idle
        starts then, not at the idle spell before it ran."""
        self.wait_for(WaitingOn.NOTHING, time.time())

    def moved_to(self, site: Site, now: float) -> None:
        """Retargeted to `site`: a job held for its annex waits for the new one; any other starts afresh."""
        self.site, self.since, self.first_looked = site, now, False
        if self.waiting_on is not WaitingOn.ANNEX:
            self.waiting_on = WaitingOn.NOTHING

    def first_look_due(self, after_s: float, idle_timeout_s: float, now: float) -> bool:
        """Whether this idle job is due its first look: once, `after_s` after it was first seen idle,
        when that comes before its first look at the idle timeout (look_due)."""
        return (self.waiting_on is WaitingOn.SLOT and not self.first_looked and after_s < idle_timeout_s
                and now - self.since > after_s)

    def look_due(self, idle_timeout_s: float, now: float) -> bool:
        """Whether this idle job is due a look: once per `idle_timeout_s` that it is seen idle."""
        return self.waiting_on is WaitingOn.SLOT and now - self.since > idle_timeout_s

    def due_a_first_look(self, after_s: float, idle_timeout_s: float, now: float) -> bool:
        """first_look_due, and if so it is given now."""
        if not self.first_look_due(after_s, idle_timeout_s, now):
            return False
        self.first_looked = True
        return True

    def due_a_look(self, idle_timeout_s: float, now: float) -> bool:
        """look_due, and if so it is given now; the first call starts its wait for a slot."""
        self.wait_for(WaitingOn.SLOT, now)
        if not self.look_due(idle_timeout_s, now):
            return False
        self.since = now
        return True


def tracked(job_info: SubmittedJobInfo) -> TrackedJob:
    return job_info.aux["htcannex"]
