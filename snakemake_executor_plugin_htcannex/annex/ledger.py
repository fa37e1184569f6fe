"""The annex ledger and guards: every annex request made from one working directory, kept on disk, and
the limits an unattended run keeps to (`catalogue.AnnexGuards`, from htcannex.yaml).

At most `max_annexes` live requests at once, never a second live request for the same annex (an annex is
named after its site, `Site.annex_name`, so a site has at most one live annex), and a core-hour budget
(nodes x cpus x lifetime hours, summed over every request ever made from this working directory).
Requests are persisted in `.htcannex/annex-requests.json`, so restarting Snakemake does not reset them;
only annexes htcannex really requested are charged (not one that was already there, not a
`create: manual` site's, which the user starts by hand).
"""
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from snakemake_executor_plugin_htcannex.sites.catalogue import AnnexGuards
from snakemake_executor_plugin_htcannex.sites.site import Site


@dataclass
class LedgerEntry:
    name: str
    site: str
    core_hours: float
    requested_at: float
    lifetime_s: float
    # When htcannex saw the annex gone before its lifetime was up (its pilot idled out, its batch job
    # was cancelled or ran out of walltime): the site may then have a new annex, charged anew.
    ended_at: float | None = None

    def live(self, now: float) -> bool:
        return self.ended_at is None and now < self.requested_at + self.lifetime_s


class AnnexLedger:
    """Every annex request made from one working directory, kept on disk."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def requests(self) -> list[LedgerEntry]:
        if not self.path.exists():
            return []
        try:
            return [LedgerEntry(**entry) for entry in json.loads(self.path.read_text())]
        except (ValueError, TypeError) as error:
            raise RuntimeError(
                f"{self.path} is not an htcannex annex ledger ({error}); it records the "
                f"annexes requested so far and the core-hours spent. Fix or delete it "
                f"(deleting resets the budget guard)."
            ) from error

    def spent_core_hours(self) -> float:
        """What every annex requested from this working directory so far costs, against the budget."""
        return sum(request.core_hours for request in self.requests())

    def add(self, request: LedgerEntry) -> None:
        self._write(self.requests() + [request])

    def mark_ended(self, name: str, now: float) -> None:
        """Record that annex `name`'s live request has ended (it left before its lifetime was up)."""
        requests = self.requests()
        for request in requests:
            if request.name == name and request.live(now):
                request.ended_at = now
        self._write(requests)

    def _write(self, requests: list[LedgerEntry]) -> None:
        entries = [asdict(r) for r in requests]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(entries, indent=1))
        os.replace(temporary, self.path)  # atomic: a crash never leaves half a ledger


class GuardRefusal(Exception):
    pass


def check_guards(guards: AnnexGuards, requests: list[LedgerEntry], site: Site, now: float) -> None:
    """Raise GuardRefusal naming the guard that forbids requesting `site`'s annex."""
    live = [r for r in requests if r.live(now)]
    name = site.annex_name
    if any(r.name == name for r in live):
        raise GuardRefusal(f"annex {name} was already requested and has not expired")
    if len(live) >= guards.max_annexes:
        raise GuardRefusal(
            f"{len(live)} annexes are live, the limit is max_annexes={guards.max_annexes}"
        )
    spent = sum(r.core_hours for r in requests)  # the ledger as of this poll (AnnexManager._look)
    wanted = site.annex_core_hours
    if spent + wanted > guards.core_hour_budget:
        raise GuardRefusal(
            f"{wanted:g} more core-hours would exceed core_hour_budget="
            f"{guards.core_hour_budget:g} ({spent:g} spent so far)"
        )
