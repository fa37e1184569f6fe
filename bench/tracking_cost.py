"""Status-tracking cost: schedd calls, CPU and wall time per status poll with 10, 1,000 and
10,000 active jobs, for htcannex's Executor.check_active_jobs and, where they are installed,
the peer plugin's (snakemake-executor-plugin-htcondor; 0.3.0 reads a shared event log like
htcannex, 0.1.2 queries the schedd per job).

The jobs are real: submitted one cluster each (as both executors do) to an embedded pool
with no slots, so they stay idle and the queue holds exactly n active jobs. Each executor
is driven through its own check_active_jobs, with its schedd (the seam object) wrapped in
a counter. Polls measured per size:
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

from .common import header, own_cpu_s

PEER_VENVS = [Path("/tmp/peer"), Path("/tmp/peer-old")]
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


class CountingSchedd:
    """The seam object with every call counted by name."""

    def __init__(self, schedd):
        self._schedd = schedd
        self.calls = Counter()

    def __getattr__(self, name):
        target = getattr(self._schedd, name)
        if not callable(target):
            return target

        def counted(*args, **kwargs):
            self.calls[name] += 1
            return target(*args, **kwargs)

        return counted


def run(args) -> None:
    header("status-tracking cost per poll (check_active_jobs)")
    executors = {"htcannex": _HtcannexDriver}
    for venv in args.peer_venvs:
        peer = _import_peer(venv)
        if isinstance(peer, str):
            print(f"   peer plugin not measured: {peer}")
        else:
            print(f"   {peer.label}: {peer.__file__}")
            executors[peer.label] = lambda log, schedd, peer=peer: _PeerDriver(peer, log, schedd)
    print(f"   {'executor':14} {'jobs':>6}  {'poll':7} {'schedd calls':>22} {'CPU ms':>9} {'wall ms':>9}")
    slowest = {}  # executor -> (jobs, wall ms) of its slowest poll so far
    for n in args.tracking_sizes:
        for name, driver_class in executors.items():
            if name in slowest:
                jobs, wall_ms = slowest[name]
                projected_s = wall_ms / 1000 * n / jobs
                if projected_s > SLOW_POLL_S:
                    print(f"   {name:14} {n:>6}  skipped: a poll took {wall_ms / 1000:.0f} s with {jobs} jobs, "
                          f"so at least ~{projected_s:.0f} s here")
                    continue
            with tempfile.TemporaryDirectory(prefix="htcannex-bench-") as scratch:
                for poll, calls, cpu_ms, wall_ms in _measure(Path(scratch), n, driver_class):
                    described = ", ".join(f"{count} {call}" for call, count in sorted(calls.items())) or "0"
                    print(f"   {name:14} {n:>6}  {poll:7} {described:>22} {cpu_ms:9.2f} {wall_ms:9.1f}", flush=True)
                    if wall_ms > slowest.get(name, (n, 0.0))[1]:
                        slowest[name] = (n, wall_ms)


def _measure(scratch: Path, n: int, driver_class):
    from htcannex_pool import Pool

    pool = Pool(scratch / "pool", slots=[])  # no slots: every job stays idle, the queue holds n
    pool.ensure_running()
    try:
        schedd = pool.schedd()
        log = scratch / "jobs.log"
        job_ids = _submit(schedd, log, n)
        counting = CountingSchedd(schedd)
        driver = driver_class(log, counting)
        active = driver.active_jobs(job_ids)
        first = driver.poll(active)
        yield ("first",) + first
        if first[2] > SLOW_POLL_S * 1000:
            return
        steady = [driver.poll(active) for _ in range(STEADY_POLLS)]
        yield ("steady", steady[-1][0], statistics.median(cpu for _, cpu, _ in steady),
               statistics.median(wall for _, _, wall in steady))
        held = job_ids[:EVENT_JOBS]
        schedd.act(htcondor2.JobAction.Hold, held, reason="bench")
        schedd.act(htcondor2.JobAction.Release, held, reason="bench")
        yield ("events",) + driver.poll(active)
    finally:
        pool.stop()


def _submit(schedd, log: Path, n: int) -> list[str]:
    """n idle jobs, one cluster each, all logging to one user log."""
    description = htcondor2.Submit({"executable": "/bin/true", "log": str(log)})
    return [f"{schedd.submit(description).cluster()}.0" for _ in range(n)]


class _HtcannexDriver:
    """htcannex's Executor with only what check_active_jobs uses (no Snakemake workflow)."""

    def __init__(self, log: Path, schedd: CountingSchedd):
        from snakemake_executor_plugin_htcannex.executor import Executor
        from snakemake_executor_plugin_htcannex.runtime import Runtime
        from snakemake_executor_plugin_htcannex.schedd import Connection
        from snakemake_executor_plugin_htcannex.tracking import EventLogTracker, HoldPolicy

        self.schedd = schedd
        self.executor = Executor.__new__(Executor)
        self.executor._runtime = Runtime(
            config=None, connection=Connection(schedd, collector=None, annex_backend=None),
            tracker=EventLogTracker(log), annexes=None, hold_policy=HoldPolicy(), submit_options=None,
            idle_timeout_s=3600, direct_commands=False, job_python="python",
        )
        self.executor.status_rate_limiter = _rate_limiter()
        self.executor.logger = logging.getLogger("bench")

    def active_jobs(self, job_ids: list[str]) -> list:
        from snakemake_executor_plugin_htcannex.executor import TrackedJob

        return [SubmittedJobInfo(SimpleNamespace(name="noop", jobid=i), external_jobid=job_id,
                                 aux={"htcannex": TrackedJob(spec=None, site=None, held_for_annex=False, stderr=None)})
                for i, job_id in enumerate(job_ids)]

    def poll(self, active: list) -> tuple[Counter, float, int]:
        return _counted_poll(self.executor, self.schedd, active)


class _PeerDriver:
    """The peer's Executor after its own __post_init__, its `htcondor.Schedd()` answering with
    our counted pool schedd, its unified log being our jobs' log."""

    def __init__(self, peer_module, log: Path, schedd: CountingSchedd):
        self.schedd = schedd
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
        return _counted_poll(self.executor, self.schedd, active)


def _counted_poll(executor, schedd: CountingSchedd, active: list) -> tuple[Counter, float, int]:
    async def consume():
        return [job async for job in executor.check_active_jobs(active)]

    schedd.calls.clear()
    cpu, wall = own_cpu_s(), time.perf_counter()
    asyncio.run(consume())
    return Counter(schedd.calls), (own_cpu_s() - cpu) * 1000, (time.perf_counter() - wall) * 1000


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
