"""The pool's access point and execute side as one object for the daemon: the schedd (queue and
requests), the negotiator, the shadows (runs) and the job policies, and the pass that drives them.

The daemon calls in under one lock, from its request threads and from its cycle thread.
"""
from collections.abc import Callable
from pathlib import Path

from .faults import Injector
from .policy import JobPolicies, PoolPolicy
from .schedd import Schedd
from .shadow import Shadows


class Scheduler:
    def __init__(self, spool: Path, origin: Path, ordinary_slot_specs: list[dict],
                 on_job_exit: Callable[[], None] = lambda: None):
        policy = PoolPolicy.load(spool)
        self.schedd = Schedd(spool, origin, ordinary_slot_specs)
        self.faults = Injector(self.schedd)
        self.shadows = Shadows(self.schedd, origin, policy.memory, on_job_exit, self.faults)
        self.policies = JobPolicies(self.schedd, policy)

    def operations(self) -> dict[str, Callable]:
        """The client requests, by the name the client sends."""
        schedd = self.schedd
        return {"submit": schedd.submit, "act": schedd.act, "edit": schedd.edit, "query": schedd.query,
                "history": schedd.history, "slots": schedd.slot_ads, "create_annex": schedd.annexes.create,
                "remove_annex": schedd.annexes.remove, "annexes": schedd.annexes.summaries,
                **self.faults.operations()}

    def cycle(self, now: float) -> bool:
        """One pass of everything that happens without a client asking.
        Returns whether a job started or ended (then the next pass should come soon)."""
        schedd = self.schedd
        busy_before = set(schedd.running)
        with schedd.store.transaction():  # one commit per pass, however many jobs changed
            schedd.annexes.lifecycle(now)
            self.shadows.reap()
            self.policies.watch_running(now)
            self.policies.periodic(now)
            if schedd.negotiator.needed:
                self.shadows.start_local_jobs()
                schedd.negotiator.negotiate(schedd.jobs, schedd.annexes.slots(), self.shadows.start)
        return set(schedd.running) != busy_before
