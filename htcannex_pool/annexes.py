"""The execute side as the schedd sees it: the pool's ordinary slots and its annexes, each a named
set of slots that comes up after a delay and expires after its lifetime (slots.py has their ads).
"""
import re
import time
from collections.abc import Callable, Iterator

from .negotiator import Negotiator
from .protocol import RequestError
from .slots import Annex, Slot, ordinary_slots
from .store import QueueStore


class Annexes:
    def __init__(self, store: QueueStore, ordinary_slot_specs: list[dict], disk_kib: int, negotiator: Negotiator,
                 evict: Callable[[tuple[int, int], str], None]):
        """`evict(job, why)`: the schedd's eviction of a job whose slot goes."""
        self._store, self._disk_kib, self._negotiator, self._evict = store, disk_kib, negotiator, evict
        self._ordinary = ordinary_slots(ordinary_slot_specs, disk_kib)
        self._annexes = {spec["name"]: Annex(spec) for spec in store.annexes()}

    def get(self, name: str | None) -> Annex | None:
        return self._annexes.get(name)

    def create(self, spec: dict):
        name = spec.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            raise RequestError(f"create_annex: name {name!r} must be letters, digits, '.', '_' or '-'")
        if name in self._annexes and self._annexes[name].state(time.time()) != "expired":
            raise RequestError(f"create_annex: an annex named {name} already exists")
        if not spec.get("owner"):
            raise RequestError(f"create_annex {name}: owner is required "
                               "(the annex only runs that owner's jobs)")
        for field in ("nodes", "cpus", "memory_mb", "lifetime_s"):
            if not isinstance(spec.get(field), (int, float)) or spec[field] <= 0:
                raise RequestError(f"create_annex {name}: {field} must be a positive number, "
                                   f"got {spec.get(field)!r}")
        if not isinstance(spec.get("transfer_methods", ""), str):
            raise RequestError(f"create_annex {name}: transfer_methods must be a string of URL methods "
                               f"(e.g. \"osdf,https\"), got {spec['transfer_methods']!r}")
        for flag in ("containers", "cgroups"):
            if not isinstance(spec.get(flag, False), bool):
                raise RequestError(f"create_annex {name}: {flag} must be true or false, got {spec[flag]!r}")
        annex = Annex({**spec, "created": time.time()})
        self._annexes[name] = annex
        self._store.save_annex(annex.spec)

    def remove(self, name: str):
        annex = self.named(name)
        self._retire_slots(annex, f"annex {name} was removed")
        del self._annexes[name]
        self._store.delete_annex(name)

    def summaries(self) -> list[dict]:
        now = time.time()
        return [annex.summary(now) for annex in self._annexes.values()]

    def named(self, name: str) -> Annex:
        if name not in self._annexes:
            raise RequestError(f"no annex named {name!r} (annexes: {', '.join(self._annexes) or 'none'})")
        return self._annexes[name]

    def slots(self) -> Iterator[Slot]:
        yield from self._ordinary
        for annex in self._annexes.values():
            yield from annex.slots

    def _retire_slots(self, annex: Annex, why: str):
        for slot in annex.slots:
            if slot.job is not None:
                self._evict(slot.job, why)
        annex.slots = []
        self._negotiator.slots_changed()

    def expire(self, annex: Annex):
        self._retire_slots(annex, f"annex {annex.name} reached the end of its lifetime")
        annex.spec["expired"] = True
        self._store.save_annex(annex.spec)

    def lifecycle(self, now: float):
        for annex in self._annexes.values():
            state = annex.state(now)
            if state == "up" and not annex.slots:
                annex.bring_up(self._disk_kib)
                self._negotiator.slots_changed()
                self._negotiator.needed = True
            if state == "up" and now >= annex.ends_at():
                self.expire(annex)

    # ---- running jobs
