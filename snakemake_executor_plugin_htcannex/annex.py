"""Annex lifecycle: is a site's annex up, and if not, request it within guards.

HTCondor only creates an annex for a user who has a job queued for it, so the
executor submits a job whose annex is not up on hold (with MY.TargetAnnexName
set), asks `AnnexManager.ensure()` for the annex, and releases the job once the
collector shows slots with that AnnexName.

The guards (`sites.AnnexGuards`, from htcannex.yaml) keep an unattended run from
"going rogue": at most `max_annexes` live requests at once, never a second live
request for the same annex (an annex is named after its site, `Site.annex_name`,
so this is also `max_per_site: 1`), and a core-hour budget (nodes x cpus x
lifetime hours, summed over every request ever made from this working directory). Requests are persisted in
`.htcannex/annex-requests.json`, so restarting Snakemake does not reset them.
"""
import enum
import getpass
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol

import htcondor2

from .catalogue import AnnexGuards
from .site import Site

MODES = ("off", "ask", "auto")


class AnnexState(enum.Enum):
    UP = "up"
    REQUESTED = "requested"  # asked for (now or earlier); jobs wait on hold
    WAITING = "waiting"  # not requested (mode, guard, refusal); the user must act


@dataclass
class AnnexStatus:
    state: AnnexState
    message: str = ""


@dataclass
class LedgerEntry:
    name: str
    site: str
    core_hours: float
    requested_at: float
    lifetime_s: float

    def live(self, now: float) -> bool:
        return now < self.requested_at + self.lifetime_s


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

    def add(self, request: LedgerEntry) -> None:
        entries = [asdict(r) for r in self.requests()] + [asdict(request)]
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
    spent = sum(r.core_hours for r in requests)
    wanted = site.annex_core_hours
    if spent + wanted > guards.core_hour_budget:
        raise GuardRefusal(
            f"{wanted:g} more core-hours would exceed core_hour_budget="
            f"{guards.core_hour_budget:g} ({spent:g} spent so far)"
        )


class AnnexBackend(Protocol):
    """How annexes are created where the jobs go (schedd.Connection.annex_backend)."""

    def describe(self, site: Site) -> str:
        """The command that creates `site`'s annex, for the user to read (or run by hand)."""

    def create(self, site: Site) -> None: ...


class HtcondorCliBackend:
    """Creates annexes with HTCondor's own `htcondor annex create` (ssh + batch job).

    The queue@system form needs ANNEX_USE_OLD_CREATE; the 25.x default form only
    builds a tarball for the user to run at the site, which an executor cannot do.
    """

    def command(self, site: Site) -> list[str]:
        request = site.annex_request()  # refuses placeholders (project, login)
        argv = [
            "htcondor", "annex", "create", request.name, f"{request.queue}@{request.system}",
            "--nodes", str(request.nodes),
            "--lifetime", str(request.lifetime_s),
        ]
        optional = {
            "--project": request.project,
            "--login-name": request.login,
            "--gpus": request.gpus,
            "--gpu-type": request.gpu_type,
            "--cpus": request.cpus,  # None on whole-node queues, which refuse them
            "--mem_mb": request.mem_mb,
        }
        for flag, value in optional.items():
            if value is not None:
                argv += [flag, str(value)]
        return argv

    def describe(self, site: Site) -> str:
        return "ANNEX_USE_OLD_CREATE=true " + shlex.join(self.command(site))

    def create(self, site: Site) -> None:
        # The knob is read through htcondor's config, which takes _CONDOR_ overrides.
        env = dict(os.environ, _CONDOR_ANNEX_USE_OLD_CREATE="true")
        result = subprocess.run(self.command(site), env=env, stdin=sys.stdin)
        if result.returncode != 0:
            raise RuntimeError(
                f"`{self.describe(site)}` exited with {result.returncode}; its output above "
                f"says why (login, allocation, queue limits)"
            )


class EmbeddedBackend:
    """Creates annexes in the embedded pool with the site's slot shape."""

    def __init__(self, pool, config_path: Optional[Path] = None):
        self.pool = pool
        self.config_path = config_path

    def command(self, site: Site) -> list[str]:
        argv = ["htcannex", "annex", "create", site.name]
        if self.config_path is not None:
            argv += ["--htcannex-config", str(self.config_path)]
        return argv + ["--pool-dir", str(self.pool.spool_dir)]

    def describe(self, site: Site) -> str:
        return shlex.join(self.command(site))

    def create(self, site: Site) -> None:
        if any(annex["name"] == site.annex_name and annex["state"] != "expired"
               for annex in self.pool.annexes()):
            return  # asked for before this working directory's ledger existed
        self.pool.create_annex(
            site.annex_name, owner=getpass.getuser(), nodes=site.nodes,
            lifetime_s=site.lifetime_s, **site.slot_shape(),
        )


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

    def is_up(self, name: str) -> bool:
        slots = self.collector.query(
            htcondor2.AdTypes.Startd,
            constraint=f"AnnexName == {json.dumps(name)}",
            projection=["Name"],
        )
        return len(slots) > 0

    def ensure(self, site: Site) -> AnnexStatus:
        """Make sure `site`'s annex is up or requested, within the mode and guards."""
        name = site.annex_name
        if self.is_up(name):
            return AnnexStatus(AnnexState.UP)
        now = self.clock()
        requests = self.ledger.requests()
        if any(r.name == name and r.live(now) for r in requests):
            return AnnexStatus(AnnexState.REQUESTED, f"annex {name} was requested, waiting for it")
        create_by_hand = (
            f"Create it yourself and the held jobs are released when it is up:\n"
            f"    {self.backend.describe(site)}"
        )
        if self.mode == "off":
            return AnnexStatus(
                AnnexState.WAITING, f"annex {name} is not up and annex mode is off. {create_by_hand}"
            )
        try:
            check_guards(self.guards, requests, site, now)
        except GuardRefusal as refusal:
            return AnnexStatus(
                AnnexState.WAITING, f"not requesting annex {name}: {refusal}. {create_by_hand}"
            )
        if self.mode == "ask":
            if name in self._declined:
                return AnnexStatus(AnnexState.WAITING, f"annex {name} declined. {create_by_hand}")
            answer = self.ask(f"Create annex {name}: {self.backend.describe(site)}?")
            if answer is None:
                return AnnexStatus(
                    AnnexState.WAITING,
                    f"annex mode is ask but there is no terminal to ask on, so annex {name} "
                    f"is treated as mode off. {create_by_hand}",
                )
            if not answer:
                self._declined.add(name)
                return AnnexStatus(AnnexState.WAITING, f"annex {name} declined. {create_by_hand}")
        try:
            self.backend.create(site)
        except Exception as error:  # ssh, batch system or pool refusals alike
            return AnnexStatus(
                AnnexState.WAITING, f"creating annex {name} failed: {error}. {create_by_hand}"
            )
        self.ledger.add(LedgerEntry(name, site.name, site.annex_core_hours, now, site.lifetime_s))
        return AnnexStatus(AnnexState.REQUESTED, f"requested annex {name}")
