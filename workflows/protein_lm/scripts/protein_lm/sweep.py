"""MLDAG-style sweep variables fanned out to runs, each with a stable uuid and a seed.

A variable is ``{value: x}``, ``{list: [a, b]}`` or ``{range: {start, stop, step}}`` (stop
excluded, as Python's range). Runs are the cartesian product of all variables, laid over the
``train`` defaults. The run id is a uuid5 of the run's parameters, so rerunning the workflow,
or adding a variable value, keeps the ids (and files) of the runs that already existed.
"""

import itertools
import json
import math
import uuid
from dataclasses import dataclass

from .config import ConfigError

RUN_NAMESPACE = uuid.UUID("6f1c1a52-5d4e-4d36-9d0c-3b3f0a6b1e27")  # fixed: ids must not change between releases


@dataclass(frozen=True)
class Run:
    id: str
    params: dict   # the full training parameters, seed included
    swept: dict    # only the swept variables, for tables and legends


def expand_variable(name: str, spec: dict) -> list:
    if "value" in spec:
        return [spec["value"]]
    if "list" in spec:
        return list(spec["list"])
    start, stop, step = (spec["range"][k] for k in ("start", "stop", "step"))
    if step == 0 or (stop - start) / step <= 0:
        raise ConfigError(f"sweep.{name}.range: start {start}, stop {stop}, step {step} gives no values")
    count = math.ceil((stop - start) / step - 1e-9)
    values = [start + i * step for i in range(count)]
    return values if all(isinstance(v, int) for v in (start, step)) else [round(v, 12) for v in values]


def expand_sweep(defaults: dict, sweep: dict) -> list[Run]:
    """One Run per point of the cartesian product, in a deterministic order."""
    names = sorted(sweep)
    runs = []
    for values in itertools.product(*(expand_variable(n, sweep[n]) for n in names)):
        swept = dict(zip(names, values))
        params = defaults | swept
        run_id = str(uuid.uuid5(RUN_NAMESPACE, json.dumps(params, sort_keys=True)))
        # Unless seeds are swept on purpose (seed-to-seed spread), each run gets its own seed.
        params.setdefault("seed", uuid.UUID(run_id).int % 2**31)
        runs.append(Run(run_id, params, swept))
    ids = [r.id for r in runs]
    if len(set(ids)) != len(ids):
        raise ConfigError("sweep: two runs have the same parameters (a list repeats a value)")
    return runs


def seed_group(run: Run) -> str:
    """Runs that differ only in seed share a group: their spread is the seed-to-seed noise."""
    return json.dumps({k: v for k, v in run.params.items() if k != "seed"}, sort_keys=True)
