"""The pool's negotiator: matches idle jobs, oldest first, to free slots (both sides'
Requirements, via classad2).

A job that matches no slot at all, busy or free, is remembered as unmatchable until the set of
slots changes or the job is edited, so a long queue of jobs waiting for an annex costs one lookup
each per negotiation, not a match.
"""
from collections.abc import Callable, Iterable

import classad2
from htcondor_codes import JobStatus

from . import local_universe
from .slots import Slot


class Negotiator:
    def __init__(self):
        self.needed = True  # set by every change that may let an idle job start
        self._slot_set_version = 0
        self._unmatchable: dict[tuple[int, int], int] = {}  # job -> the slot set it matched nothing in

    def slots_changed(self) -> None:
        """Slots appeared or went: every job may match again."""
        self._slot_set_version += 1

    def forget(self, key: tuple[int, int]) -> None:
        """The job was edited or left the queue."""
        self._unmatchable.pop(key, None)

    def negotiate(self, jobs: dict[tuple[int, int], classad2.ClassAd], slots: Iterable[Slot],
                  start: Callable[[classad2.ClassAd, Slot], None]) -> None:
        """`start` runs a matched job on its slot; a start that fails (the job is held) leaves the slot free."""
        self.needed = False
        slots = list(slots)
        free = [slot for slot in slots if slot.job is None]
        for key, ad in list(jobs.items()):
            if not free:
                return
            if (ad["JobStatus"] != JobStatus.IDLE or local_universe.is_local(ad)
                    or self._unmatchable.get(key) == self._slot_set_version):
                continue
            slot = next((slot for slot in free if ad.symmetricMatch(slot.ad)), None)
            if slot is None:
                if not any(ad.symmetricMatch(busy.ad) for busy in slots if busy.job is not None):
                    self._unmatchable[key] = self._slot_set_version
                continue
            start(ad, slot)
            if slot.job is not None:
                free.remove(slot)
