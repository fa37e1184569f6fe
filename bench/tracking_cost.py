"""Status-tracking cost: schedd calls, CPU and wall time per status poll with 10, 1,000 and
10,000 active jobs, for htcannex's Executor.check_active_jobs and, where they are installed,
the peer plugin's (snakemake-executor-plugin-htcondor; 0.3.0 reads a shared event log like
htcannex, 0.1.2 queries the schedd per job).

The jobs are real: submitted one cluster each (as both executors do) to an embedded pool
with no slots, so they stay idle and the queue holds exactly n active jobs. Each executor
is driven through its own check_active_jobs, with its schedd (the seam object) wrapped in
a counter. htcannex is measured twice: with jobs that wait for nothing but a slot, and with
jobs waiting for their annexes ("annex wait": submitted held, spread over the local
profile's annex sites, each annex requested in the ledger and not up yet), which also asks
the collector and reads the annex ledger (both counted). Polls measured per size:
- first:  reads the n submit events of a log it has not seen;
- steady: nothing new in the log (the common case between events), median of several;
- events: after 10 jobs were held and released (20 new events).
CPU is this process's (the executor's) CPU; the pool daemon's work is what the schedd
calls cost and is counted by them. Each executor has Snakemake's status rate limiter at its
default (100 checks/s), so wall time shows what an executor that takes it per job waits.
An executor is not measured at a size where its slowest poll so far, scaled linearly,
would take over SLOW_POLL_S (a per-job query executor grows faster than that: each query
scans the whole queue).
"""
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import htcondor2
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo

from .common import REPO, header, own_cpu_s

PEER_VENVS = [Path("/tmp/peer"), Path("/tmp/peer-old")]
PROFILE_CATALOGUE = REPO / "profiles" / "local" / "htcannex.yaml"
STEADY_POLLS = 5
EVENT_JOBS = 10
SLOW_POLL_S = 30.0
STATUS_CHECKS_PER_S = 100  # Snakemake's default --max-status-checks-per-second


def add_arguments(parser) -> None:
    group = parser.add_argument_group("tracking")
    group.add_argument("--tracking-sizes", type=int, nargs="+", default=[10, 1000, 10000], metavar="N",
                       help="active-job counts to measure (default 10 1000 10000)")
    group.add_argument("--peer-venvs", type=Path, nargs="*", default=PEER_VENVS, metavar="DIR",
                       help="venvs holding a snakemake-executor-plugin-htcondor to compare (default /tmp/peer "
                            "/tmp/peer-old: `python3 -m venv /tmp/peer && /tmp/peer/bin/pip install "
                            "snakemake-executor-plugin-htcondor`, and ==0.1.2 in /tmp/peer-old)")


class Counting:
    """An object (the schedd, the collector, the annex ledger) with every call counted in `calls`
    as `prefix` + the method's name."""

    def __init__(self, target, calls: Counter, prefix: str = ""):
        self._target, self._calls, self._prefix = target, calls, prefix

    def __getattr__(self, name):
        target = getattr(self._target, name)
        if not callable(target):
            return target

        def counted(*args, **kwargs):
            self._calls[self._prefix + name] += 1
            return target(*args, **kwargs)

        return counted


def run(args) -> None:
    header("status-tracking cost per poll (check_active_jobs)")
    executors = {"htcannex": _HtcannexDriver, "htcannex, annex wait": _AnnexWaitDriver}
    for venv in args.peer_venvs:
        peer = _import_peer(venv)
        if isinstance(peer, str):
            print(f"   peer plugin not measured: {peer}")
        else:
            print(f"   {peer.label}: {peer.__file__}")
            executors[peer.label] = lambda log, pool, calls, peer=peer: _PeerDriver(peer, log, pool, calls)
    print(f"   {'executor':20} {'jobs':>6}  {'poll':7} {'calls (schedd unless named)':>44} {'CPU ms':>9} "
          f"{'wall ms':>9}")
    slowest = {}  # executor -> (jobs, wall ms) of its slowest poll so far
    for n in args.tracking_sizes:
        for name, driver_class in executors.items():
            if name in slowest:
                jobs, wall_ms = slowest[name]
                projected_s = wall_ms / 1000 * n / jobs
                if projected_s > SLOW_POLL_S:
                    print(f"   {name:20} {n:>6}  skipped: a poll took {wall_ms / 1000:.0f} s with {jobs} jobs, "
                          f"so at least ~{projected_s:.0f} s here")
                    continue
            with tempfile.TemporaryDirectory(prefix="htcannex-bench-") as scratch:
                for poll, calls, cpu_ms, wall_ms in _measure(Path(scratch), n, driver_class):
                    described = ", ".join(f"{count} {call}" for call, count in sorted(calls.items())) or "0"
                    print(f"   {name:20} {n:>6}  {poll:7} {described:>44} {cpu_ms:9.2f} {wall_ms:9.1f}", flush=True)
                    if wall_ms > slowest.get(name, (n, 0.0))[1]:
                        slowest[name] = (n, wall_ms)


def _measure(scratch: Path, n: int, driver_class):
    from htcannex_pool import Pool

    pool = Pool(scratch / "pool", slots=[])  # no slots: every job stays idle, the queue holds n
    pool.ensure_running()
    try:
        schedd = pool.schedd()
        log = scratch / "jobs.log"
        calls = Counter()
        driver = driver_class(log, pool, calls)
        held = getattr(driver, "held", False)
        job_ids = _submit(schedd, log, n, held)
        active = driver.active_jobs(job_ids)
        first = driver.poll(active)
        yield ("first",) + first
        if first[2] > SLOW_POLL_S * 1000:
            return
        steady = [driver.poll(active) for _ in range(STEADY_POLLS)]
        yield ("steady", steady[-1][0], statistics.median(cpu for _, cpu, _ in steady),
               statistics.median(wall for _, _, wall in steady))
        # 20 new events: held jobs released and held again, idle ones held and released
        actions = (htcondor2.JobAction.Release, htcondor2.JobAction.Hold)
        for action in actions if held else reversed(actions):
            schedd.act(action, job_ids[:EVENT_JOBS], reason="bench")
        yield ("events",) + driver.poll(active)
    finally:
        pool.stop()


def _submit(schedd, log: Path, n: int, held: bool) -> list[str]:
    """n idle (or held) jobs, one cluster each, all logging to one user log."""
    description = htcondor2.Submit({"executable": "/bin/true", "log": str(log), "hold": str(held).lower()})
    return [f"{schedd.submit(description).cluster()}.0" for _ in range(n)]


class _HtcannexDriver:
    """htcannex's Executor with only what check_active_jobs uses (no Snakemake workflow), its
    annex manager on the local profile's catalogue."""

    held = False  # how the jobs are submitted

    def __init__(self, log: Path, pool, calls: Counter):
        from snakemake_executor_plugin_htcannex.annex.backends import EmbeddedBackend
        from snakemake_executor_plugin_htcannex.annex.ledger import AnnexLedger
        from snakemake_executor_plugin_htcannex.annex.manager import AnnexManager
        from snakemake_executor_plugin_htcannex.sites.catalogue import load_catalogue
        from snakemake_executor_plugin_htcannex.executor import Executor
        from snakemake_executor_plugin_htcannex.status_check import StatusCheck
        from snakemake_executor_plugin_htcannex.submit.description import SubmitOptions
        from snakemake_executor_plugin_htcannex.waiting import HeldAndIdle
        from snakemake_executor_plugin_htcannex.track.liveness import SILENT_CHECKS, ScheddWatch
        from snakemake_executor_plugin_htcannex.runtime import Runtime
        from snakemake_executor_plugin_htcannex.schedd import Connection
        from snakemake_executor_plugin_htcannex.track.event_log import EventLogTracker, HoldPolicy

        self.calls = calls
        catalogue = load_catalogue(PROFILE_CATALOGUE)
        ledger = AnnexLedger(log.parent / "annex-requests.json")
        self.sites = self._sites_waited_for(catalogue, ledger)
        annexes = AnnexManager(Counting(pool.collector(), calls, "collector "), EmbeddedBackend(pool),
                               Counting(ledger, calls, "ledger "), catalogue.annex, mode=catalogue.annex.mode)
        schedd = Counting(pool.schedd(), calls)
        self.executor = Executor.__new__(Executor)
        self.executor.logger = logging.getLogger("bench")
        self.executor._unreported = {}
        # As the local profile's status interval (1 s) sets it: a schedd query after 5 s of silence.
        self.executor._watch = ScheddWatch(schedd, SILENT_CHECKS * 1.0, True, self.executor.logger)
        self.executor._runtime = Runtime(
            config=catalogue, connection=Connection(schedd, collector=None),
            tracker=EventLogTracker(log), annexes=annexes, hold_policy=HoldPolicy(),
            submit_options=SubmitOptions(workdir=log.parent, log_path=log),
            idle_timeout_s=3600, direct_commands=False, job_python="python",
        )
        self.executor._held_and_idle = HeldAndIdle(self.executor._runtime, self.executor.logger, "fail",
                                                   self.executor.report_job_error)
        self.executor._status_check = StatusCheck(self.executor._runtime, self.executor._held_and_idle,
                                                  self.executor.report_job_success, self.executor.report_job_error)
        self.executor.status_rate_limiter = _rate_limiter()

    def _sites_waited_for(self, catalogue, ledger) -> list:
        return []  # the jobs wait for a slot only

    def active_jobs(self, job_ids: list[str]) -> list:
        from snakemake_executor_plugin_htcannex.track.tracked_job import TrackedJob, WaitingOn

        sites = self.sites or [None]
        return [SubmittedJobInfo(SimpleNamespace(name="noop", jobid=i), external_jobid=job_id,
                                 aux={"htcannex": TrackedJob(spec=None, site=sites[i % len(sites)],
                                                             waiting_on=WaitingOn.ANNEX if self.held else WaitingOn.NOTHING, stderr=None,
                                                             prepared_script=None)})
                for i, job_id in enumerate(job_ids)]

    def poll(self, active: list) -> tuple[Counter, float, int]:
        return _counted_poll(self.executor, self.calls, active)


class _AnnexWaitDriver(_HtcannexDriver):
    """The jobs wait for their annexes, spread over the local profile's annex sites: each annex
    requested (in the ledger) and not up, as between htcannex asking for an annex and its slots
    appearing."""

    held = True  # htcannex queues a job held while its annex is not up

    def _sites_waited_for(self, catalogue, ledger) -> list:
        from snakemake_executor_plugin_htcannex.annex.ledger import LedgerEntry
        from snakemake_executor_plugin_htcannex.sites.site import SiteKind

        sites = [site for site in catalogue.sites.values() if site.kind is SiteKind.ANNEX and not site.manual]
        for site in sites:
            ledger.add(LedgerEntry(site.annex_name, site.name, site.annex_core_hours, time.time(), site.lifetime_s))
        return sites


class _PeerDriver:
    """The peer's Executor after its own __post_init__, its `htcondor.Schedd()` answering with
    our counted pool schedd, its unified log being our jobs' log."""

    def __init__(self, peer_module, log: Path, pool, calls: Counter):
        self.calls = calls
        schedd = Counting(pool.schedd(), calls)
        # Both versions call `htcondor.Schedd()` for every use (0.1.2 imports the version-1
        # bindings as `htcondor`, 0.3.0 imports htcondor2 as `htcondor`).
        peer_module.htcondor = SimpleNamespace(Schedd=lambda *a, **k: schedd, JobAction=htcondor2.JobAction)
        self.executor = peer_module.Executor.__new__(peer_module.Executor)
        self.executor.workflow = SimpleNamespace(executor_settings=SimpleNamespace(
            jobdir=str(log.parent / "peer-jobdir"), shared_fs_prefixes=None, held_timeout=None))
        self.executor.logger = logging.getLogger("bench")
        self.executor.status_rate_limiter = _rate_limiter()
        self.executor.__post_init__()
        self.executor._unified_log_file = str(log)

    def active_jobs(self, job_ids: list[str]) -> list:
        # The peer tracks one job per cluster by its ClusterId.
        return [SubmittedJobInfo(SimpleNamespace(name="noop", jobid=i), external_jobid=int(job_id.split(".")[0]))
                for i, job_id in enumerate(job_ids)]

    def poll(self, active: list) -> tuple[Counter, float, int]:
        return _counted_poll(self.executor, self.calls, active)


def _counted_poll(executor, calls: Counter, active: list) -> tuple[Counter, float, int]:
    async def consume():
        return [job async for job in executor.check_active_jobs(active)]

    calls.clear()
    cpu, wall = own_cpu_s(), time.perf_counter()
    asyncio.run(consume())
    return Counter(calls), (own_cpu_s() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def _rate_limiter():
    """Snakemake's status rate limiter at its default rate, as RemoteExecutor builds it."""
    from throttler import Throttler

    return Throttler(rate_limit=STATUS_CHECKS_PER_S, period=1)


def _import_peer(venv: Path):
    """The peer plugin's module, imported from its own venv's site-packages but without that
    venv's htcondor (it pins htcondor<25; its code uses htcondor2, which ours provides).
    A string saying why when it is not there."""
    found = sorted(venv.glob("lib/python*/site-packages/snakemake_executor_plugin_htcondor/__init__.py"))
    if not found:
        return (f"no snakemake_executor_plugin_htcondor in {venv} (install it there with "
                f"`python3 -m venv {venv} && {venv}/bin/pip install snakemake-executor-plugin-htcondor`)")
    import importlib.metadata
    import importlib.util

    version = next(importlib.metadata.distributions(name="snakemake-executor-plugin-htcondor",
                                                    path=[str(found[0].parent.parent)])).version
    # 0.1.x imports the version-1 bindings, which htcondor 25 no longer has: give it a
    # stand-in module; _PeerDriver replaces its only use (htcondor.Schedd) anyway.
    sys.modules.setdefault("htcondor", SimpleNamespace(__name__="htcondor"))
    spec = importlib.util.spec_from_file_location(f"peer_htcondor_{version.replace('.', '_')}", found[0])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.label = f"peer {version}"
    return module
