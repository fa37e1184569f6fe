"""An experiment: its runs (one per point of the vars' product), their chunks, and the training
command of each chunk with the contract's placeholders filled in (docs/bring_your_own_training.md).

A run's uuid is a uuid5 of the experiment's name and the run's var values, cut to 8 hex digits as
MLDAG's run_uuid: the same in every Snakemake process and rerun, and adding a value to a var
keeps the uuids (and files) of the runs that already existed. Its seed comes from the uuid.
"""
import difflib
import json
import re
import shlex
import string
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from .variables import Chunking, VarsError, expand, swept

RUN_NAMESPACE = uuid.UUID("0d3c3f0e-6a43-4c55-9f0a-5b0e3c1e7a11")  # fixed: run uuids must not change
SEED_RANGE = 1_000_000  # MLDAG draws random_seed from 0..1e6
# What the contract adds to a chunk's MLDAG VARS; a var cannot take one of these names.
CONTRACT_PLACEHOLDERS = ("first_epoch", "chunk", "chunks", "resume_from", "write_to", "self_checkpoint", "threads", "workflow_dir",
                         "python", "checkpoint")
MLDAG_VARS = ("epoch", "run_uuid", "random_seed", "ResourceName", "continue_from_checkpoint")
# MLDAG's run_number: which repetition of its point of the other vars a run is. The talk's VARS give
# 0 to run0 and run1 alike; an experiment that wants repetitions sweeps it as a var
# (`run_number: {type: range, stop: 3}`), whose value then wins.
RUN_NUMBER = 0


# The keys of an MLDAG Experiment.yaml htcannex reads (docs/mldag.md); any other is refused.
EXPERIMENT_KEYS = ("name", "submit_template", "vars", "study")


@dataclass(frozen=True)
class Run:
    uuid: str
    seed: int
    vars: dict  # every var's value in this run, epochs and epochs_per_job included


@dataclass(frozen=True)
class Experiment:
    name: str
    chunking: Chunking
    runs: dict  # run uuid -> Run, in the order of the vars' product
    swept: tuple  # names of the vars that take more than one value

    @property
    def slug(self) -> str:
        """The name as a path component."""
        return re.sub(r"[^a-z0-9]+", "_", self.name.lower()).strip("_") or "experiment"

    def chunk_vars(self, run: Run, chunk: int) -> dict:
        """The VARS MLDAG's generator gives chunk `chunk` (1-based) of `run`, but ResourceName (the
        site, which the executor knows when it places the job)."""
        values = {"epoch": self.chunking.last_epoch(chunk), "run_uuid": run.uuid, "random_seed": run.seed,
                  "run_number": RUN_NUMBER}
        if chunk > 1:
            values["continue_from_checkpoint"] = "true"
        return values | run.vars

    def baseline_vars(self, run: Run, chunk: int | None = None) -> dict:
        """The VARS of a run's twin: every epoch in one job (as a one-chunk experiment: epoch =
        epochs_per_job = epochs), or with `chunk` (a twin in chunks, study.twin: chunked) that
        chunk's VARS of the run; the run's seed and vars, and a run_uuid of its own (uuid5 of the
        run's), so that files a template names by $(run_uuid) never meet the run's."""
        twin = uuid.uuid5(RUN_NAMESPACE, f"baseline twin of {run.uuid}").hex[:8]
        if chunk is not None:
            return self.chunk_vars(run, chunk) | {"run_uuid": twin}
        return ({"epoch": self.chunking.epochs, "run_uuid": twin, "random_seed": run.seed, "run_number": RUN_NUMBER}
                | run.vars | {"epochs_per_job": self.chunking.epochs})


def read(config: Mapping) -> tuple[str, dict]:
    """(where the experiment is described, the config with an MLDAG Experiment.yaml laid over it):
    the config key `experiment` names the file; its name, vars and submit_template win."""
    path = config.get("experiment")
    if not path:
        return "config", dict(config)
    try:
        with open(path) as handle:
            experiment = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as error:
        raise VarsError(f"config key experiment: cannot read {path}: {error}") from None
    if not isinstance(experiment, dict) or not isinstance(experiment.get("submit_template", ""), str):
        raise VarsError(f"{path}: an experiment is a mapping with name, submit_template (text) and vars")
    for key in experiment:
        if key not in EXPERIMENT_KEYS:
            raise VarsError(f"{path}: unknown key {key!r}: an experiment has {', '.join(EXPERIMENT_KEYS)}; "
                            + _nearest(key, experiment[key]))
    return path, dict(config) | experiment


def _nearest(key: object, value: object) -> str:
    """What an unknown top-level key most likely is: a var put outside `vars`, or a misspelling."""
    if key in ("epochs", "epochs_per_job") or (isinstance(value, Mapping) and "type" in value):
        return f"a var goes under vars: (`vars: {{{key}: {{type: value, value: ...}}}}`)"
    near = difflib.get_close_matches(str(key), EXPERIMENT_KEYS, n=1, cutoff=0.5)
    return f"did you mean {near[0]!r}?" if near else "remove it"


def load(source: str, config: Mapping) -> Experiment:
    """The experiment that `config` (a workflow config or an MLDAG Experiment.yaml) describes."""
    name = config.get("name")
    if not isinstance(name, str) or not name.strip():
        raise VarsError(f"{source}: 'name' is missing: give the experiment a name (MLDAG's `name:`)")
    specs = config.get("vars")
    for reserved in (*MLDAG_VARS, *CONTRACT_PLACEHOLDERS):
        if isinstance(specs, Mapping) and reserved in specs:
            raise VarsError(f"{source}: vars.{reserved} is set by the workflow for every chunk; rename the var")
    chunking, points = expand(source, specs)
    runs = {}
    for values in points:
        key = json.dumps({"name": name, "vars": values}, sort_keys=True)
        full = uuid.uuid5(RUN_NAMESPACE, key)
        runs[full.hex[:8]] = Run(full.hex[:8], full.int % SEED_RANGE, values)
    if len(runs) != len(points):
        raise VarsError(f"{source}: two runs cut to the same 8-digit uuid; rename the experiment")
    return Experiment(name, chunking, runs, tuple(swept(specs)))


@dataclass(frozen=True)
class Study:
    """An MLDAG experiment's twin study (its `study:` key): `metric` from the JSON `file` each run
    and each twin leave, `$(run_uuid)` in it the run's or the twin's, judged paired against
    `margin` (chunked_training.equivalence: TOST at `alpha`, seeds needed for `power`); `bitwise`:
    the training is deterministic and its sites the same hardware, so a run and its twin must
    leave the same metric to the bit; `twin`: UNBROKEN (one job) or CHUNKED (the run's chunks,
    every one on the pinned site: for a run longer than the pinned site's annex lifetime)."""

    metric: str
    file: str
    margin: float
    alpha: float = 0.05
    power: float = 0.8
    bitwise: bool = False
    twin: str = "unbroken"


UNBROKEN, CHUNKED = "unbroken", "chunked"  # study.twin


# Which runs repeat each other (a study's seed group): runs whose vars differ only in these.
REPETITION_VARS = ("run_number", "seed")

_STUDY_EXAMPLE = "`study: {metric: loss, file: output/$(run_uuid)/metrics.json, margin: 0.05}`"


def study(source: str, config: Mapping) -> "Study | None":
    """The experiment's `study:`, checked; None without one (its runs then have no twins)."""
    spec = config.get("study")
    if spec is None:
        return None
    required = {"metric": str, "file": str, "margin": (int, float)}
    optional = {"alpha": float, "power": float, "bitwise": bool, "twin": str}
    if not isinstance(spec, Mapping) or not set(required) <= set(spec):
        raise VarsError(f"{source}: study: give metric (the number to compare), file (the JSON each run leaves, "
                        f"with $(run_uuid)) and margin (the largest difference that counts as equivalent), e.g. "
                        f"{_STUDY_EXAMPLE}")
    for key, value in spec.items():
        kind = required.get(key) or optional.get(key)
        if kind is None:
            raise VarsError(f"{source}: study.{key} is not a study key: a study has {', '.join(required)} and "
                            f"optionally {', '.join(optional)}")
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise VarsError(f"{source}: study.{key} = {value!r} is not a {getattr(kind, '__name__', 'number')}; "
                            f"e.g. {_STUDY_EXAMPLE}")
    if "$(run_uuid)" not in spec["file"] or spec["margin"] <= 0:
        raise VarsError(f"{source}: study.file must name $(run_uuid) (a run and its twin leave their own) and "
                        "study.margin must be above 0")
    if spec.get("twin", UNBROKEN) not in (UNBROKEN, CHUNKED):
        raise VarsError(f"{source}: study.twin is {UNBROKEN} (one job over every epoch, pinned) or {CHUNKED} (the "
                        "run's chunks, every one on the pinned site: for a run longer than its annex lifetime)")
    if not all(0 < spec.get(key, 0.5) < 1 for key in ("alpha", "power")):
        raise VarsError(f"{source}: study.alpha (each one-sided test's) and study.power (for the seeds needed) are "
                        "between 0 and 1, e.g. alpha: 0.05, power: 0.8")
    return Study(**{key: spec[key] for key in required} | {key: spec[key] for key in optional if key in spec}
                 | {"margin": float(spec["margin"])})


def format_command(source: str, template: str, values: Mapping, shell_words: Mapping = {}) -> str:
    """`template` with each {placeholder} replaced by its value, quoted for the shell; the
    `shell_words` go in as they are (the job's shell expands them).

    Raises VarsError naming an unknown placeholder and the ones there are."""
    quoted = {name: shlex.quote(str(value)) for name, value in values.items()} | dict(shell_words)
    for _, field, _, _ in string.Formatter().parse(template):
        if field is not None and field not in quoted:
            raise VarsError(f"{source}: the command's placeholder {{{field}}} is not one of "
                            f"{', '.join('{' + name + '}' for name in quoted)}; write a literal brace as {{{{ or }}}}")
    return template.format_map(quoted)
