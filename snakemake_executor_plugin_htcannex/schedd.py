"""The seam to HTCondor: open a schedd and a collector, real or embedded.

Everything else in the plugin talks to the two objects returned here and only
through the calls of `Schedd` and `Collector` below (docs/architecture.md), which
`htcondor2.Schedd` and `htcondor2.Collector` already have; the embedded pool's
PoolSchedd and PoolCollector implement the same calls. How annexes are created there
(`htcondor annex create` on a real access point, the pool's own annexes on the embedded one)
is the annex side's choice (annex/backends.py, backend_for), from the connection's `pool`.
"""
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol

import classad2
import htcondor2
from htcondor_codes import PARAM_DEFAULTS_S, param_seconds


# The value of `pool:` (htcannex.yaml) or `--htcannex-schedd` that selects the
# embedded pool, and the one that selects the local access point's own schedd.
EMBEDDED = "local"
DEFAULT = "default"
# How long a queued job waits at most for a negotiator's cycle: HTCondor's NEGOTIATOR_INTERVAL (the central
# manager's setting, which an access point's configuration usually leaves at its default). The embedded pool
# matches in the daemon's cycle after each change (htcannex_pool/daemon.py).
EMBEDDED_NEGOTIATION_S = 1.0


class Schedd(Protocol):
    """The calls the plugin makes on a schedd."""

    def submit(self, description: htcondor2.Submit, count: int = 0, spool: bool = False,
               itemdata=None, queue=None): ...

    def act(self, action: htcondor2.JobAction, job_spec, reason: Optional[str] = None) -> classad2.ClassAd: ...

    def edit(self, job_spec, attr: str, value: str): ...

    def query(self, constraint="true", projection: Sequence[str] = (), **kwargs) -> list[classad2.ClassAd]: ...

    def history(self, constraint, projection: Sequence[str] = (), match: int = -1,
                **kwargs) -> Iterable[classad2.ClassAd]: ...

    def reschedule(self) -> None:
        """Start queued jobs on the claims the schedd holds and ask the negotiator for a cycle (as every submit
        does: htcondor2's submit sends RESCHEDULE)."""


class Collector(Protocol):
    """The call the plugin makes on a collector: slot (Startd) ads."""

    def query(self, ad_type=htcondor2.AdTypes.Any, constraint="true",
              projection: Sequence[str] = ()) -> list[classad2.ClassAd]: ...


@dataclass
class Connection:
    """A schedd and a collector."""

    schedd: Schedd
    collector: Collector
    # The embedded pool (htcannex_pool.Pool) they belong to; None for a real access point.
    pool: Optional[object] = None
    negotiation_interval_s: float = PARAM_DEFAULTS_S["NEGOTIATOR_INTERVAL"]  # a queued job is matched within this

    @property
    def embedded(self) -> bool:
        """Whether the execute points are this machine (the embedded pool)."""
        return self.pool is not None


class ScheddNotFound(RuntimeError):
    pass


# What a call on the schedd raises when it cannot be reached, does not answer in time, or refuses:
# the bindings' HTCondorException (the embedded pool's PoolError is one), or a socket's OSError.
UNANSWERED = (htcondor2.HTCondorException, OSError)


def job_id(ad: classad2.ClassAd) -> str:
    """The HTCondor job id ("cluster.proc") of a job ad."""
    return f"{ad['ClusterId']}.{ad['ProcId']}"


def job_constraint(job: str) -> str:
    """The constraint that selects one job by its id ("cluster.proc")."""
    cluster, proc = job.split(".")
    return f"ClusterId == {cluster} && ProcId == {proc}"


def connect(target: str, pool_dir: Optional[Path] = None, create_pool: bool = True) -> Connection:
    """Open the pool named by `target`.

    `target` is "local" (the embedded pool in `pool_dir`), "default" (this access
    point's schedd and the configured collector) or the name of a schedd that the
    configured collector knows. Without `create_pool` (a command that only looks) an embedded pool is not made where none has run.
    """
    if target == EMBEDDED:
        return _connect_embedded(pool_dir, create_pool)
    collector = htcondor2.Collector()
    schedd = _local_schedd() if target == DEFAULT else _locate_schedd(collector, target)
    return Connection(schedd, collector,
                      negotiation_interval_s=param_seconds("NEGOTIATOR_INTERVAL"))


def _local_schedd():
    try:
        return htcondor2.Schedd()
    except htcondor2.HTCondorException as error:
        raise ScheddNotFound(
            f"pool: default means the schedd of the HTCondor access point this runs on, found through its "
            f"HTCondor configuration (CONDOR_CONFIG, or /etc/condor/condor_config), and there is none here "
            f"({error}). Fix: run this on an access point where `condor_q` works for you (or point "
            f"CONDOR_CONFIG at its configuration); or set `pool:` in htcannex.yaml (or --htcannex-schedd) to "
            f"the name of a schedd your collector knows; or use the local profile (--profile profiles/local, "
            f"`pool: local`): the embedded pool on this machine"
        ) from error


def _connect_embedded(pool_dir: Optional[Path], create_pool: bool) -> Connection:
    # Imported here so that a plugin talking to a real pool never loads the pool.
    from htcannex_pool import Pool, PoolError

    pool = Pool(pool_dir) if pool_dir is not None else Pool()
    if not create_pool and not pool.spool_dir.is_dir():
        raise ScheddNotFound(
            f"no embedded pool has run in {pool.spool_dir}, so it has no job to show. Run this in the directory "
            "you ran snakemake in, or name the pool's spool with --pool-dir (or $HTCANNEX_POOL_DIR); for a "
            "real access point, give --profile with `pool: default` or --schedd NAME")
    try:
        pool.ensure_running()
    except PoolError as error:  # its message says what is wrong and what to do
        raise ScheddNotFound(f"the embedded pool does not answer: {error}") from error
    return Connection(pool.schedd(), pool.collector(), pool,
                      negotiation_interval_s=EMBEDDED_NEGOTIATION_S)


def _locate_schedd(collector, name: str):
    try:
        location = collector.locate(htcondor2.DaemonType.Schedd, name)
    except Exception as error:  # the bindings raise plain HTCondorException types
        raise ScheddNotFound(
            f"schedd {name!r} is not known to the collector ({error}); "
            f"check --htcannex-schedd or `pool:` in htcannex.yaml "
            f"(`condor_status -schedd` lists the names)"
        ) from error
    return htcondor2.Schedd(location)
