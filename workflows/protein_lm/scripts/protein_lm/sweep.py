"""protein_lm's sweep variables as values: ``{value: x}``, ``{list: [a, b]}`` or
``{range: {start, stop, step}}`` (stop excluded, as Python's range, but fractional steps allowed).

The runs themselves (the cartesian product, run uuids, seeds) are chunked_training's
(workflows/chunked_training/scripts/chunked_training/experiment.py); protein_lm hands it these
values as MLDAG-style vars (rules/chunked_training.smk).
"""

import math

from .config import ConfigError


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
