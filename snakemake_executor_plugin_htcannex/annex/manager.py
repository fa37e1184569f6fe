"""Annex lifecycle: is a site's annex up, and if not, request it within guards.

HTCondor only creates an annex for a user who has a job queued for it, so the
executor submits a job whose annex is not up on hold (with MY.TargetAnnexName
set), asks `AnnexManager.ensure()` for the annex, and releases the job once the
collector shows slots with that AnnexName. It does so only for a job its site
admits (placement.py): no annex is ever requested for a job that cannot run there.

The guards and the ledger (ledger.py) keep an unattended run from "going rogue"; the
backend (backends.py, htcondor_cli.py) creates and ends annexes where the jobs go.

An annex may leave before its lifetime is up (its pilot shuts down after idling, its batch job is
cancelled or runs out of walltime): once seen up and then gone, its request is over, and the
site's next job gets a new annex (charged anew). A request that never came up is withdrawn when
its jobs are moved to another site (`withdraw`), and at the end of a run (`release`) every annex
this run requested is ended, so that none is left idling on an allocation.

In a run, `htcondor annex create` (an ssh login and a batch submit at the site, 13-15 s on a loopback
Slurm, longer across the country) runs on a thread of its own (`tell_outcome`): the submit
thread and the status thread, which decide under one lock, would otherwise wait for it, holding back
every other job's submit and every finished job's report, and a sweep over six sites would request
its six annexes one after another. A create in flight counts against the guards as a request.

The status thread asks `ensure()` about every job waiting for an annex at each poll;
`new_poll()` makes the next `ensure()` read the collector (one query for the slots of
every annex) and the ledger once, and the rest of the poll uses what they said.
"""
import enum
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Optional

import htcondor2
from htcondor_codes import HEARD_FROM_LATELY

from snakemake_executor_plugin_htcannex.annex.ledger import AnnexLedger, GuardRefusal, LedgerEntry, check_guards
from snakemake_executor_plugin_htcannex.sites.catalogue import AnnexGuards
from snakemake_executor_plugin_htcannex.sites.site import Site

MODES = ("off", "ask", "auto")
# The slots that make an annex up: those of a live pilot (not the lingering ads of one killed outright).
UP_ANNEX_SLOTS = f"AnnexName isnt undefined && {HEARD_FROM_LATELY}"
# A failed create (ssh refused, the batch system said no) is tried again after this long, not at every
# status poll: each try is an ssh login at the site.
CREATE_RETRY_S = 300.0


class AnnexState(enum.Enum):
    UP = "up"
    REQUESTED = "requested"  # asked for (now or earlier); jobs wait on hold
    NEEDS_USER = "needs the user"  # not requested (mode, guard, refusal): the user must act


@dataclass
class AnnexStatus:
    state: AnnexState
    message: str = ""


def ask_on_terminal(question: str) -> Optional[bool]:
    """The user's yes/no, or None when there is no terminal to ask on."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    print(question + " [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


class AnnexManager:
    def __init__(
        self,
        collector,
        backend,
        ledger: AnnexLedger,
        guards: AnnexGuards,
        mode: str = "auto",
        ask: Callable[[str], Optional[bool]] = ask_on_terminal,
        clock: Callable[[], float] = time.time,
        tell_outcome: Optional[Callable[["AnnexStatus"], None]] = None,
    ):
        if mode not in MODES:
            raise ValueError(
                f"annex mode {mode!r} is not one of {', '.join(MODES)} (set `annex: mode:` "
                f"in htcannex.yaml or --htcannex-annex-mode)"
            )
        self.collector = collector
        self.backend = backend
        self.ledger = ledger
        self.guards = guards
        self.mode = mode
        self.ask = ask
        self.clock = clock
        # Asked once per run: ensure() runs again at every status check.
        self._declined: set[str] = set()
        self._told_manual: set[str] = set()  # manual sites whose steps were printed in full
        self._up: Optional[set[str]] = None  # annex names with slots, as of this poll
        self._requests: Optional[list[LedgerEntry]] = None  # the ledger, as of this poll
        self._seen_up: set[str] = set()  # annexes seen with slots in this run
        self._requested: dict[str, Site] = {}  # annexes this run requested, by name
        self._given_up: set[str] = set()  # annexes that did not come up in time (give_up)
        self._failed: dict[str, tuple[float, AnnexStatus]] = {}  # name -> when and how its create last failed
        # The submit thread (a job just queued) and the status thread (jobs already waiting) both ask;
        # one decision at a time, or both would create the same annex (a second annex, charged twice).
        self._deciding = threading.Lock()
        # With `tell_outcome` (a run) creates run on threads of their own, which tell what came of each;
        # without (`htcannex annex create`), in ensure() itself, which returns it.
        self._tell_outcome = tell_outcome
        self._creator = ThreadPoolExecutor(thread_name_prefix="htcannex-annex-create") if tell_outcome else None
        self._creating: dict[str, LedgerEntry] = {}  # annex name -> the request being made now

    def new_poll(self) -> None:
        """Forget what the collector and the ledger said: the next ensure() asks them again."""
        self._up = self._requests = None

    def _look(self) -> tuple[set[str], list[LedgerEntry]]:
        """The annexes with slots (one collector query for all of them) and the ledger, once per poll.
        run_job (Snakemake's thread) and the status thread both ask: locals, not the attributes, are
        returned, so a new_poll() in between cannot hand back None."""
        up, requests = self._up, self._requests
        if up is None:
            slots = self.collector.query(htcondor2.AdTypes.Startd, constraint=UP_ANNEX_SLOTS, projection=["AnnexName"])
            up = self._up = {slot["AnnexName"] for slot in slots}
            self._seen_up |= up
        if requests is None:
            requests = self._requests = self.ledger.requests()
        return up, requests

    def is_up(self, site: Site) -> bool:
        """Whether `site`'s annex has slots, as of this poll."""
        return site.annex_name in self._look()[0]

    def ensure(self, site: Site) -> AnnexStatus:
        """Make sure `site`'s annex is up or requested, within the mode and guards."""
        with self._deciding:
            return self._ensure(site)

    def _ensure(self, site: Site) -> AnnexStatus:
        name = site.annex_name
        if self.is_up(site):
            return AnnexStatus(AnnexState.UP)
        requests = self._look()[1]
        if site.manual:
            return self._by_hand(site)
        now = self.clock()
        if any(r.name == name and r.live(now) for r in requests):
            if name not in self._seen_up:
                return AnnexStatus(AnnexState.REQUESTED, f"annex {name} was requested, waiting for it")
            # It was up in this run and has left before its lifetime was up: that request is over.
            self.ledger.mark_ended(name, now)
            self._seen_up.discard(name)
            requests = self._requests = self.ledger.requests()
        if name in self._given_up:
            return AnnexStatus(AnnexState.NEEDS_USER, f"annex {name} did not come up in time and was withdrawn; "
                                                   "this run does not request it again")
        create_by_hand = (
            f"Create it yourself and the held jobs are released when it is up:\n"
            f"    {self.backend.describe(site)}"
        )
        if self.mode == "off":
            return AnnexStatus(
                AnnexState.NEEDS_USER, f"annex {name} is not up and annex mode is off. {create_by_hand}"
            )
        if name in self._creating:
            return AnnexStatus(AnnexState.REQUESTED, f"annex {name} is being requested, waiting for it")
        try:
            check_guards(self.guards, [*requests, *self._creating.values()], site, now)
        except GuardRefusal as refusal:
            return AnnexStatus(
                AnnexState.NEEDS_USER, f"not requesting annex {name}: {refusal}. {create_by_hand}"
            )
        if self.mode == "ask":
            if name in self._declined:
                return AnnexStatus(AnnexState.NEEDS_USER, f"annex {name} declined. {create_by_hand}")
            answer = self.ask(f"Create annex {name}: {self.backend.describe(site)}?")
            if answer is None:
                return AnnexStatus(
                    AnnexState.NEEDS_USER,
                    f"annex mode is ask but there is no terminal to ask on, so annex {name} "
                    f"is treated as mode off. {create_by_hand}",
                )
            if not answer:
                self._declined.add(name)
                return AnnexStatus(AnnexState.NEEDS_USER, f"annex {name} declined. {create_by_hand}")
        failed = self._failed.get(name)
        if failed is not None and now < failed[0] + CREATE_RETRY_S:
            return failed[1]
        self._creating[name] = LedgerEntry(name, site.name, site.annex_core_hours, now, site.lifetime_s)
        if self._creator is None:
            return self._record(site, self._try_create(site), create_by_hand)
        self._creator.submit(self._create_in_background, site, create_by_hand)
        return AnnexStatus(AnnexState.REQUESTED, f"requesting annex {name}")

    def _try_create(self, site: Site) -> bool | Exception:
        """The backend's create: True (requested), False (it was there already), or what it raised."""
        try:
            return self.backend.create(site)
        except Exception as error:  # ssh, batch system or pool refusals alike
            return error

    def _create_in_background(self, site: Site, create_by_hand: str) -> None:
        outcome = self._try_create(site)  # without the lock: the other threads go on meanwhile
        with self._deciding:
            status = self._record(site, outcome, create_by_hand)
        self._tell_outcome(status)

    def _record(self, site: Site, outcome: bool | Exception, create_by_hand: str) -> AnnexStatus:
        """What came of the create of `site`'s annex (in _creating), recorded; called with the lock held."""
        name = site.annex_name
        entry = self._creating.pop(name)
        if isinstance(outcome, Exception):
            status = AnnexStatus(AnnexState.NEEDS_USER, f"creating annex {name} failed: {outcome}. It is tried "
                                                     f"again in {CREATE_RETRY_S:g} s. {create_by_hand}")
            self._failed[name] = (entry.requested_at, status)
            return status
        self._failed.pop(name, None)
        if not outcome:
            return AnnexStatus(AnnexState.REQUESTED, f"annex {name} is already coming up (not requested by "
                                                     "this run, not charged to its budget), waiting for it")
        self.ledger.add(entry)
        if self._requests is not None:
            self._requests.append(entry)
        self._requested[name] = site
        return AnnexStatus(AnnexState.REQUESTED, f"requested annex {name}")

    def give_up(self, site: Site) -> str:
        """`site`'s annex did not come up in time and its jobs are moved elsewhere: end the request (still
        queued at the site, or up by now) and request it no more in this run. Says what was done."""
        with self._deciding:
            self._given_up.add(site.annex_name)
            return self._end(site)

    def release(self) -> list[str]:
        """End every annex this run requested (the run is over: none may idle on the allocation), and the
        shared ssh connections it opened. Says what was done, one line per annex. A create in flight is
        waited for first, so that the annex it requests is ended too."""
        if self._creator is not None:
            self._creator.shutdown(wait=True)  # outside the lock: a create thread takes it to record
        with self._deciding:
            said = [f"annex {name}: {self._end(site)}" for name, site in list(self._requested.items())]
            close = getattr(self.backend, "close_logins", None)
            if close is not None:
                close()
            return said

    def _end(self, site: Site) -> str:
        try:
            said = self.backend.withdraw(site)
        except Exception as error:  # ssh, batch system or schedd alike: say it, end the others
            said = f"could not end it ({error}); it ends by itself when idle or at the end of its lifetime"
        self.ledger.mark_ended(site.annex_name, self.clock())
        self._requested.pop(site.annex_name, None)
        self.new_poll()
        return said
    def _by_hand(self, site: Site) -> AnnexStatus:
        """A `create: manual` site: never requested or charged; the steps are said once in full."""
        name = site.annex_name
        why = (f"annex {name} is not up, and site {site.name} is created by hand (sites.{site.name}.create: "
               "manual): htcannex does not request it and charges nothing to the budget. The held jobs are "
               "released when its slots appear.")
        if name in self._told_manual:
            return AnnexStatus(AnnexState.NEEDS_USER, why)
        self._told_manual.add(name)
        return AnnexStatus(AnnexState.NEEDS_USER, f"{why} {self.backend.manual_steps(site)}")
