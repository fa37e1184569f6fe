"""The seam to HTCondor: open a schedd and a collector, real or embedded.

Everything else in the plugin talks to the two objects returned here and only
through the calls listed in docs/architecture.md, which `htcondor2.Schedd` and
`htcondor2.Collector` already have; the embedded pool implements the same calls.
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import htcondor2

# The value of `pool:` (htcannex.yaml) or `--htcannex-schedd` that selects the
# embedded pool, and the one that selects the local access point's own schedd.
EMBEDDED = "local"
DEFAULT = "default"


@dataclass
class Connection:
    """A schedd and a collector; `pool` is set only for the embedded pool."""

    schedd: Any
    collector: Any
    pool: Optional[Any] = None


class ScheddNotFound(RuntimeError):
    pass


def connect(target: str, pool_dir: Optional[Path] = None) -> Connection:
    """Open the pool named by `target`.

    `target` is "local" (the embedded pool in `pool_dir`), "default" (this access
    point's schedd and the configured collector) or the name of a schedd that the
    configured collector knows.
    """
    if target == EMBEDDED:
        return _connect_embedded(pool_dir)
    collector = htcondor2.Collector()
    if target == DEFAULT:
        return Connection(_local_schedd(), collector)
    return Connection(_locate_schedd(collector, target), collector)


def _local_schedd():
    try:
        return htcondor2.Schedd()
    except htcondor2.HTCondorException as error:
        raise ScheddNotFound(
            f"pool: default means the schedd of the HTCondor access point this runs on (found through "
            f"its HTCondor configuration, CONDOR_CONFIG), and there is none here ({error}). Fix: run "
            f"Snakemake on an access point where `condor_q` works for you; or set `pool:` in "
            f"htcannex.yaml (or --htcannex-schedd) to the name of a schedd your collector knows; "
            f"or `pool: local` for the embedded pool on this machine"
        ) from error


def _connect_embedded(pool_dir: Optional[Path]) -> Connection:
    # Imported here so that a plugin talking to a real pool never loads the pool.
    from htcannex_pool import Pool

    pool = Pool(pool_dir) if pool_dir is not None else Pool()
    pool.ensure_running()
    return Connection(pool.schedd(), pool.collector(), pool)


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
