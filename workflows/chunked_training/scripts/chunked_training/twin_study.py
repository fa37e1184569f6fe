"""An MLDAG experiment's study on the user's own metric: each run against its twin (the same VARS,
seed included, trained unbroken on the pinned site), then per seed group (runs whose vars differ
only in run_number or seed, experiment.REPETITION_VARS) the paired equivalence study
(chunked_training.equivalence), with the provenance of every number it used.

Plain dicts in, rows out (compare.py writes them as tables, rule check judges them).
"""
import hashlib
import json
import math
from pathlib import Path

from .equivalence import equivalence
from .experiment import REPETITION_VARS, Study

VARIANTS = ("distributed", "baseline")


def group_of(swept: dict) -> str:
    """A run's seed group: its swept vars but the repetition's, as name=value words ("all" for none)."""
    return " ".join(f"{name}={value}" for name, value in swept.items() if name not in REPETITION_VARS) or "all"


def read_metric(path: str, metric: str) -> tuple[float | None, str]:
    """(the metric's value, "") from the JSON a run left, or (None, what is wrong and where)."""
    try:
        value = json.loads(Path(path).read_text()).get(metric)
    except FileNotFoundError:
        return None, f"{path} is missing: the study's file (study.file) was not left by the job"
    except (OSError, ValueError, AttributeError) as error:
        return None, f"{path} is no JSON object ({error})"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, f"{path}: {metric!r} is {value!r}, not a finite number (study.metric)"
    return float(value), ""


def twin_verdict(values: dict, problems: list[str], study: Study) -> str:
    """One run's twin check: identical, a difference for the study, or an ERROR no setting lets pass."""
    if problems:
        return "ERROR: " + "; ".join(problems)
    run, twin = values["distributed"], values["baseline"]
    if run == twin:
        return "identical (bitwise)"
    if study.bitwise:
        return (f"ERROR: differs from its twin ({run!r} vs {twin!r}) where study.bitwise says the training "
                "is deterministic on the same hardware: a resume bug")
    return "differs (judged by the study)"


def compare(runs: dict, files: dict, study: Study) -> tuple[list[dict], list[dict], list[dict]]:
    """(summary: one row per run, study: one row per seed group, provenance: one row per run and
    variant). `runs`: run uuid -> its swept vars; `files`: run uuid -> [its file, its twin's]."""
    summary, provenance, pairs = [], [], {}
    metric = study.metric
    for run, swept in runs.items():
        values, problems = {}, []
        for variant, path in zip(VARIANTS, files[run]):
            values[variant], problem = read_metric(path, metric)
            problems += [problem] if problem else []
            provenance.append({"run": run, "variant": variant, "file": path,
                               "sha256": _sha256(path) if Path(path).is_file() else "",
                               metric: values[variant]})
        verdict = twin_verdict(values, problems, study)
        delta = None if problems else values["distributed"] - values["baseline"]
        summary.append({"run": run, **swept, f"{metric}:distributed": values["distributed"],
                        f"{metric}:baseline": values["baseline"], f"{metric}:delta": delta, "verdict": verdict})
        found = pairs.setdefault(group_of(swept), [])
        if delta is not None:
            found.append((values["distributed"], values["baseline"]))
    rows = []
    for group, found in pairs.items():
        row = equivalence([d for d, _ in found], [b for _, b in found], study.margin, study.alpha, study.power)
        members = [r for r in summary if group_of(runs[r["run"]]) == group]
        if len(found) < len(members):  # a run without its number: the group's study is not the one planned
            row["verdict"] = f"ERROR: no {metric} for {len(members) - len(found)} of {len(members)} runs (see summary.tsv)"
        rows.append({"group": group, "metric": metric, **row, "alpha": study.alpha, "power": study.power,
                     "deltas": " ".join(f"{d - b:+.4g}" for d, b in found), "runs": " ".join(r["run"] for r in members)})
    return summary, rows, provenance


def _sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
