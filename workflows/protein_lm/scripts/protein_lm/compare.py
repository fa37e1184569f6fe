"""Distributed (hopping) runs against their pinned baseline twins: tables and a verdict.

Equivalence is judged against seed-to-seed spread: a hop-induced change no larger than what a
different seed does to the baseline is noise. On one machine the twins should be bitwise equal
(same code, same RNG streams); across GPU types only the statistical verdict means anything.
"""

import statistics
from dataclasses import dataclass

import torch

VARIANTS = ("distributed", "baseline")
METRICS = ("val_loss", "spearman")


@dataclass(frozen=True)
class RunResult:
    run_id: str
    variant: str
    swept: dict
    seed_group: str
    state: dict          # the final checkpoint: weights, history (per-epoch loss, time, site), segments
    evaluations: list    # evaluate_chunk outputs, chunk order
    finetune: dict

    @property
    def metrics(self) -> dict:
        return {"val_loss": self.evaluations[-1]["val_loss"], "spearman": self.finetune["spearman"]}

    @property
    def wall_s(self) -> float:
        return sum(epoch["wall_s"] for epoch in self.state["history"])

    @property
    def sites(self) -> list[str]:
        return sorted({epoch["site"] for epoch in self.state["history"]})


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def verdict(delta: float | None, baseline_values: list, equivalence_k: float, min_seeds: int, identical: bool) -> str:
    if identical:
        return "identical (bitwise)"
    values = [v for v in baseline_values if v is not None]
    if delta is None or len(values) < min_seeds:
        return f"insufficient seeds ({len(values)} < {min_seeds})"
    spread = statistics.stdev(values)
    if abs(delta) <= equivalence_k * spread:
        return "equivalent"
    return f"differs (|delta| > {equivalence_k:g} x SD {spread:.3g})"


def summary_rows(results: list[RunResult], equivalence_k: float, min_seeds: int) -> list[dict]:
    """One row per run: both variants' metrics, their delta and the verdict."""
    by_run = {(r.run_id, r.variant): r for r in results}
    rows = []
    for run_id in dict.fromkeys(r.run_id for r in results):
        dist, base = by_run[(run_id, "distributed")], by_run[(run_id, "baseline")]
        group = [r for r in results if r.variant == "baseline" and r.seed_group == base.seed_group]
        identical = same_weights(dist.state["model"], base.state["model"])
        row = {"run": run_id, **{f"param:{name}": value for name, value in dist.swept.items()}}
        for metric in METRICS:
            d, b = dist.metrics[metric], base.metrics[metric]
            delta = None if d is None or b is None else d - b
            row |= {
                f"{metric}:distributed": d, f"{metric}:baseline": b, f"{metric}:delta": delta,
                f"{metric}:verdict": verdict(delta, [g.metrics[metric] for g in group], equivalence_k, min_seeds, identical),
            }
        row |= {
            "wall_s:distributed": dist.wall_s, "wall_s:baseline": base.wall_s,
            "sites:distributed": " ".join(dist.sites), "sites:baseline": " ".join(base.sites),
        }
        rows.append(row)
    return rows


def per_site_rows(results: list[RunResult]) -> list[dict]:
    """Epoch wall time per site: where hops cost or gain time."""
    times: dict[tuple[str, str], list[float]] = {}
    for r in results:
        for epoch in r.state["history"]:
            times.setdefault((r.variant, epoch["site"]), []).append(epoch["wall_s"])
    return [
        {"variant": variant, "site": site, "epochs": len(values), "mean_epoch_s": statistics.fmean(values),
         "sd_epoch_s": statistics.stdev(values) if len(values) > 1 else 0.0}
        for (variant, site), values in sorted(times.items())
    ]
