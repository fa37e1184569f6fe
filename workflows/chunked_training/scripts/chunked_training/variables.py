"""MLDAG's `vars`, read as MLDAG reads them (iross/MLDAG, mldag/models/experiment.py).

    name: {type: value, value: 30, description: "..."}          one value
    name: {type: list,  value: [0.1, 0.01]}                        swept over
    name: {type: range, start: 0, stop: 10, step: 1}               Python's range: start 0 and
                                                                   step 1 by default, stop excluded
Values are numbers or strings. `epochs` and `epochs_per_job` make the chunks; every other var is
swept (the cartesian product of all their values is the set of runs).
"""
import difflib
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass

KINDS = ("value", "list", "range")
KEYS = {"value": {"value"}, "list": {"value"}, "range": {"start", "stop", "step"}}
CHUNKING = ("epochs", "epochs_per_job")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A value reaches a shell command (quoted) and an HTCondor submit description (as a macro): one
# line, no control characters, so it can never start a new command in either.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


class VarsError(ValueError):
    """A var the experiment cannot run with; the message names the source, the var and the fix."""


@dataclass(frozen=True)
class Chunking:
    epochs: int
    epochs_per_job: int

    @property
    def chunks(self) -> int:
        return self.epochs // self.epochs_per_job

    def last_epoch(self, chunk: int) -> int:
        """MLDAG's `epoch` VAR: the last epoch chunk `chunk` (1-based) trains to."""
        return chunk * self.epochs_per_job


def expand(source: str, specs: Mapping) -> tuple[Chunking, list[dict]]:
    """(the chunking, one dict of var values per run) in a deterministic order."""
    if not isinstance(specs, Mapping):
        raise VarsError(f"{source}: 'vars' must be a mapping of var name to {{type: ..., value: ...}}")
    values = {name: _values(source, name, spec) for name, spec in specs.items()}
    for name in CHUNKING:
        if name not in values:
            raise VarsError(f"{source}: vars.{name} is missing; add `{name}: {{type: value, value: N}}`")
        if len(values[name]) != 1 or not _whole(values[name][0]) or values[name][0] < 1:
            raise VarsError(f"{source}: vars.{name} must be one whole number >= 1 (type: value), "
                            f"not {values[name]!r}: every run is chunked the same way")
    chunking = Chunking(values["epochs"][0], values["epochs_per_job"][0])
    if chunking.epochs % chunking.epochs_per_job:
        raise VarsError(f"{source}: vars.epochs ({chunking.epochs}) is not a multiple of vars.epochs_per_job "
                        f"({chunking.epochs_per_job}); MLDAG would silently drop the last "
                        f"{chunking.epochs % chunking.epochs_per_job} epoch(s): change one of them")
    names = list(values)
    runs = [dict(zip(names, point)) for point in itertools.product(*(values[n] for n in names))]
    return chunking, runs


def swept(specs: Mapping) -> list[str]:
    """The vars that take more than one value (what tells runs apart in tables)."""
    return [name for name, spec in specs.items() if spec.get("type") in ("list", "range")]


def _values(source: str, name: object, spec: object) -> list:
    where = f"{source}: vars.{name}"
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise VarsError(f"{where}: a var name is an identifier (letters, digits, _), as in $({name})")
    if not isinstance(spec, Mapping) or spec.get("type") not in KINDS:
        raise VarsError(f"{where}: give a mapping with `type: value`, `type: list` or `type: range`")
    kind = spec["type"]
    unknown = set(spec) - KEYS[kind] - {"type", "description"}
    if unknown:
        valid = sorted(KEYS[kind] | {"description"})
        near = [f"{key} (did you mean {match[0]}?)" if (match := difflib.get_close_matches(str(key), valid, n=1))
                else str(key) for key in sorted(unknown, key=str)]
        raise VarsError(f"{where}: type {kind} does not take {', '.join(near)}; it takes "
                        f"{', '.join(sorted(KEYS[kind]))} (and description)")
    if kind == "range":
        bounds = {"start": spec.get("start", 0), "stop": spec.get("stop"), "step": spec.get("step", 1)}
        if bounds["stop"] is None:
            raise VarsError(f"{where}: a range needs `stop` (excluded, as in Python's range)")
        for key, bound in bounds.items():
            if not _whole(bound):
                raise VarsError(f"{where}.{key}: {bound!r} is not a whole number; a range is Python's "
                                "range (whole numbers); for other values use `type: list`")
        if bounds["step"] == 0:
            raise VarsError(f"{where}.step: 0 gives no values")
        values = list(range(bounds["start"], bounds["stop"], bounds["step"]))
        if not values:
            raise VarsError(f"{where}: range({bounds['start']}, {bounds['stop']}, {bounds['step']}) is empty "
                            "(stop is excluded)")
        return values
    if "value" not in spec:
        raise VarsError(f"{where}: type {kind} needs `value`")
    if kind == "value":
        values = [spec["value"]]
    else:
        values = spec["value"]
        if not isinstance(values, list) or not values:
            raise VarsError(f"{where}.value: type list takes a non-empty list, e.g. [0.1, 0.01]")
        if len({repr(v) for v in values}) != len(values):
            raise VarsError(f"{where}.value: {values!r} repeats a value (two runs would be the same)")
    for value in values:
        check_value(where, value)
    return values


def check_value(where: str, value: object) -> None:
    """Numbers and one-line strings only: what can go into a shell command and a submit macro."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise VarsError(f"{where}: {value!r} is not a number or a string")
    if isinstance(value, str) and CONTROL_CHARACTERS.search(value):
        raise VarsError(f"{where}: {value!r} holds a control character (newline, tab...): a value must be one "
                        "line, or it would start a new command in the submit description")


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
