"""Annex lifecycle: is a site's annex up, and if not, request it within guards.

HTCondor only creates an annex for a user who has a job queued for it, so the
executor submits a job whose annex is not up on hold (with MY.TargetAnnexName
set), asks `AnnexManager.ensure()` for the annex, and releases the job once the
collector shows slots with that AnnexName. It does so only for a job its site
admits (placement.py): no annex is ever requested for a job that cannot run there.

The guards (`catalogue.AnnexGuards`, from htcannex.yaml) keep an unattended run from
"going rogue": at most `max_annexes` live requests at once, never a second live
request for the same annex (an annex is named after its site, `Site.annex_name`,
so a site has at most one live annex), and a core-hour budget (nodes x cpus x
lifetime hours, summed over every request ever made from this working directory).
Requests are persisted in `.htcannex/annex-requests.json`, so restarting Snakemake
does not reset them; only annexes htcannex really requested are charged (not one
that was already there, not a `create: manual` site's, which the user starts by hand).

The status thread asks `ensure()` about every job waiting for an annex at each poll;
`new_poll()` makes the next `ensure()` read the collector (one query for the slots of
every annex) and the ledger once, and the rest of the poll uses what they said.
"""
import enum
import getpass
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol

import htcondor2

from snakemake_executor_plugin_htcannex.sites.catalogue import AnnexGuards
from snakemake_executor_plugin_htcannex.sites.site import Site
from snakemake_executor_plugin_htcannex.units import format_duration_s

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

    def spent_core_hours(self) -> float:
        """What every annex requested from this working directory so far costs, against the budget."""
        return sum(request.core_hours for request in self.requests())

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
    spent = sum(r.core_hours for r in requests)  # the ledger as of this poll (AnnexManager._look)
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

    def manual_steps(self, site: Site) -> str:
        """What the user runs to bring up a `create: manual` site's annex by hand."""

    def create(self, site: Site) -> bool:
        """Request `site`'s annex; False when it was already there (nothing was requested)."""


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

    def create(self, site: Site) -> bool:
        # The knob is read through htcondor's config, which takes _CONDOR_ overrides.
        env = dict(os.environ, _CONDOR_ANNEX_USE_OLD_CREATE="true")
        result = subprocess.run(self.command(site), env=env, stdin=sys.stdin)
        if result.returncode != 0:
            raise RuntimeError(
                f"`{self.describe(site)}` exited with {result.returncode}; its output above "
                f"says why (login, allocation, queue limits)"
            )
        return True

    def manual_steps(self, site: Site) -> str:
        """A site in HTCondor's SYSTEM_TABLE that needs an interactive (two-factor) login: HTCondor
        25's self-service `htcondor annex create NAME`, whose setup tarball the user runs at the
        site (htcondor_cli/annex_create.py; README.annex-setup). Any other site (a cloud VM such as
        Jetstream2's): an execute point joining this pool that advertises the annex's name and
        starts only this user's jobs for it, as an annex pilot's configuration does
        (condor_scripts/annex/00-annex-pilot-base)."""
        name = site.annex_name
        if site.facts == "system-table":
            tarball = f"annex-{name}.tar"
            return (f"On this access point (the held jobs for it are already queued):\n"
                    f"    htcondor annex create {name}\n"
                    f"copy the {tarball} it writes to {site.system}, and there:\n"
                    f"    tar xf {tarball} && cd annex-{name} && ./annex-setup.sh\n"
                    f"then add your allocation and queue ({site.queue}, {site.nodes} node(s), at most "
                    f"{format_duration_s(site.lifetime_s)}) to the hpc.slurm it writes and `sbatch hpc.slurm`.")
        collector = htcondor2.param.get("COLLECTOR_HOST", "<this pool's central manager>")
        return (f"Start a machine at {site.name}{f' ({site.queue})' if site.queue else ''} with HTCondor 25 "
                f"installed, give it a token to join this pool (`condor_token_fetch` here, saved in its "
                f"tokens.d), and this configuration (e.g. /etc/condor/config.d/50-{name}.conf):\n"
                f"    use role:execute\n"
                f"    CONDOR_HOST = {collector}\n"
                f"    AnnexName = \"{name}\"\n"
                f"    STARTD_ATTRS = $(STARTD_ATTRS) AnnexName\n"
                f"    START = $(START) && MY.AnnexName == TARGET.TargetAnnexName && "
                f"TARGET.Owner == \"{getpass.getuser()}\"\n"
                f"then run condor_master there, and stop the machine after {format_duration_s(site.lifetime_s)} "
                f"(sites.{site.name}.lifetime).")


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

    def manual_steps(self, site: Site) -> str:
        # The embedded pool plays the execute point a user starts by hand.
        return f"Bring it up by hand:\n    {self.describe(site)}"

    def create(self, site: Site) -> bool:
        if any(annex["name"] == site.annex_name and annex["state"] != "expired"
               for annex in self.pool.annexes()):
            return False  # asked for before this working directory's ledger existed, or by hand
        self.pool.create_annex(
            site.annex_name, owner=getpass.getuser(), nodes=site.nodes,
            lifetime_s=site.lifetime_s, **site.slot_shape(),
        )
        return True


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
        self._told_manual: set[str] = set()  # manual sites whose steps were printed in full
        self._up: Optional[set[str]] = None  # annex names with slots, as of this poll
        self._requests: Optional[list[LedgerEntry]] = None  # the ledger, as of this poll
        # The submit thread (a job just queued) and the status thread (jobs already waiting) both ask;
        # one decision at a time, or both would create the same annex (a second annex, charged twice).
        self._deciding = threading.Lock()

    def new_poll(self) -> None:
        """Forget what the collector and the ledger said: the next ensure() asks them again."""
        self._up = self._requests = None

    def _look(self) -> tuple[set[str], list[LedgerEntry]]:
        """The annexes with slots (one collector query for all of them) and the ledger, once per poll.
        run_job (Snakemake's thread) and the status thread both ask: locals, not the attributes, are
        returned, so a new_poll() in between cannot hand back None."""
        up, requests = self._up, self._requests
        if up is None:
            slots = self.collector.query(htcondor2.AdTypes.Startd, constraint="AnnexName isnt undefined",
                                         projection=["AnnexName"])
            up = self._up = {slot["AnnexName"] for slot in slots}
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
            requested = self.backend.create(site)
        except Exception as error:  # ssh, batch system or pool refusals alike
            return AnnexStatus(
                AnnexState.WAITING, f"creating annex {name} failed: {error}. {create_by_hand}"
            )
        if not requested:
            return AnnexStatus(AnnexState.REQUESTED, f"annex {name} is already coming up (not requested by "
                                                     "this run, not charged to its budget), waiting for it")
        entry = LedgerEntry(name, site.name, site.annex_core_hours, now, site.lifetime_s)
        self.ledger.add(entry)
        requests.append(entry)
        return AnnexStatus(AnnexState.REQUESTED, f"requested annex {name}")

    def _by_hand(self, site: Site) -> AnnexStatus:
        """A `create: manual` site: never requested or charged; the steps are said once in full."""
        name = site.annex_name
        why = (f"annex {name} is not up, and site {site.name} is created by hand (sites.{site.name}.create: "
               "manual): htcannex does not request it and charges nothing to the budget. The held jobs are "
               "released when its slots appear.")
        if name in self._told_manual:
            return AnnexStatus(AnnexState.WAITING, why)
        self._told_manual.add(name)
        return AnnexStatus(AnnexState.WAITING, f"{why} {self.backend.manual_steps(site)}")
