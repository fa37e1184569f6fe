"""Distributed (hopping) runs against their pinned twins: provenance, bitwise checks, and a
paired equivalence study that can fail.

Per run: did every epoch train exactly once, in its planned job and on its planned site
(snakemake_executor_plugin_htcannex.ops.provenance)? Did the hopping run end bitwise equal to its
twin when both ran on the same hardware at the same precision (any difference there is a resume
bug, not noise)? Which devices and precisions did it use (a run mixing them is labelled)?

Per group of runs that differ only in seed (the study): the paired deltas d_i = distributed_i -
baseline_i (same seed, hopping vs pinned) of each metric, judged by chunked_training.equivalence against
the margins fixed in the config before the run; "ERROR: provenance" where a run of the group
failed the provenance check (its numbers prove nothing).
"""

import statistics
from dataclasses import dataclass

from chunked_training.equivalence import Margins, equivalence
from scipy import stats
from snakemake_executor_plugin_htcannex.ops import provenance

from .finetuning import METHODS

VARIANTS = ("distributed", "baseline")
METRICS = ("val_loss", "spearman")


@dataclass(frozen=True)
class RunResult:
    run_id: str
    variant: str
    swept: dict
    seed_group: str
    evaluations: list    # evaluate_chunk outputs, chunk order; the last carries the final checkpoint's
                         # history (per-epoch loss, time, site, job, device), segments and weights digest
    finetune: dict

    @property
    def state(self) -> dict:
        return self.evaluations[-1]

    @property
    def metrics(self) -> dict:
        return {"val_loss": self.evaluations[-1]["val_loss"], "spearman": self.finetune["spearman"]}

    @property
    def wall_s(self) -> float:
        return sum(epoch["wall_s"] for epoch in self.state["history"])

    @property
    def sites(self) -> list[str]:
        return sorted({epoch["site"] for epoch in self.state["history"]})

    @property
    def hardware(self) -> list[str]:
        """Device, precision and torch of its epochs, in order of first use."""
        return list(dict.fromkeys(hardware_label(epoch) for epoch in self.state["history"]))


def hardware_label(epoch: dict) -> str:
    # Checkpoints from before devices were recorded say nothing: "unrecorded".
    return " ".join(str(epoch.get(key, "unrecorded")) for key in ("device", "precision", "torch"))


@dataclass(frozen=True)
class Plan:
    """What the run was meant to do: per variant, the chunk that trains epoch 1 and how many
    epochs each chunk trains (the unbroken twin: one chunk, all of them)."""

    total_epochs: int
    chunks: dict  # variant -> {"first_chunk": k, "epochs_per_job": n}

    @classmethod
    def from_dict(cls, plan: dict) -> "Plan":
        return cls(plan["total_epochs"], {variant: plan[variant] for variant in VARIANTS})

    def chunk_of_epoch(self, variant: str):
        first, per_job = self.chunks[variant]["first_chunk"], self.chunks[variant]["epochs_per_job"]
        return lambda epoch: first + (epoch - 1) // per_job


def provenance_checks(results: list[RunResult], plan: Plan, jobs) -> dict:
    """(run, variant) -> provenance.Check of its final checkpoint's history."""
    return {
        (r.run_id, r.variant): provenance.check_epochs(r.state["history"], r.run_id, plan.total_epochs,
                                                       plan.chunk_of_epoch(r.variant), jobs)
        for r in results
    }


def bitwise_check(dist: RunResult, base: RunResult) -> tuple[bool, str]:
    """(identical, verdict) of one run's twins."""
    identical = dist.state["weights_sha256"] == base.state["weights_sha256"]
    if identical:
        return True, "identical (bitwise)"
    if dist.hardware == base.hardware and len(dist.hardware) == 1:
        return False, f"ERROR: differs from its twin on the same hardware ({dist.hardware[0]}): a resume bug"
    return False, "differs (other hardware or precision: judged by the study)"


def provenance_rows(results: list[RunResult], checks: dict) -> list[dict]:
    return [{"run": r.run_id, "variant": r.variant, "state": checks[(r.run_id, r.variant)].state,
             "check": checks[(r.run_id, r.variant)].summary(),
             "jobs": " ".join(dict.fromkeys(str(e.get("job")) for e in r.state["history"])),
             "slots": " ".join(dict.fromkeys(str(e.get("slot")) for e in r.state["history"]))}
            for r in results]


def summary_rows(results: list[RunResult], checks: dict) -> list[dict]:
    """One row per run: both variants' metrics and their delta, the bitwise check, hardware, provenance."""
    by_run = {(r.run_id, r.variant): r for r in results}
    rows = []
    for run_id in dict.fromkeys(r.run_id for r in results):
        dist, base = by_run[(run_id, "distributed")], by_run[(run_id, "baseline")]
        identical, verdict = bitwise_check(dist, base)
        failed = [v for v in VARIANTS if checks[(run_id, v)].state == provenance.ERROR]
        if failed:
            verdict = "ERROR: provenance of " + ", ".join(failed) + " (see provenance.tsv)"
        row = {"run": run_id, **{f"param:{name}": value for name, value in dist.swept.items()}}
        for metric in METRICS:
            d, b = dist.metrics[metric], base.metrics[metric]
            row |= {f"{metric}:distributed": d, f"{metric}:baseline": b,
                    f"{metric}:delta": None if d is None or b is None else d - b}
        row |= {
            "verdict": verdict, "bitwise": "yes" if identical else "no",
            "hardware:distributed": mixed(dist.hardware), "hardware:baseline": mixed(base.hardware),
            "provenance:distributed": checks[(run_id, "distributed")].state,
            "provenance:baseline": checks[(run_id, "baseline")].state,
            "wall_s:distributed": dist.wall_s, "wall_s:baseline": base.wall_s,
            "sites:distributed": " ".join(dist.sites), "sites:baseline": " ".join(base.sites),
        }
        rows.append(row)
    return rows


def mixed(hardware: list[str]) -> str:
    return hardware[0] if len(hardware) == 1 else "MIXED: " + " + ".join(hardware)


def equivalence_rows(results: list[RunResult], checks: dict, margins: Margins) -> list[dict]:
    """One row per seed group and metric: the paired study."""
    by_run = {(r.run_id, r.variant): r for r in results}
    rows = []
    for group in dict.fromkeys(r.seed_group for r in results):
        runs = [r.run_id for r in results if r.variant == "baseline" and r.seed_group == group]
        failed = [run for run in runs if any(checks[(run, v)].state == provenance.ERROR for v in VARIANTS)]
        mixed_runs = [run for run in runs if any(len(by_run[(run, v)].hardware) > 1 for v in VARIANTS)]
        swept = {k: v for k, v in by_run[(runs[0], "baseline")].swept.items() if k != "seed"}
        for metric in METRICS:
            pairs = [(by_run[(run, "distributed")].metrics[metric], by_run[(run, "baseline")].metrics[metric]) for run in runs]
            pairs = [(d, b) for d, b in pairs if d is not None and b is not None]
            row = equivalence([d for d, _ in pairs], [b for _, b in pairs], margins.margin[metric], margins.alpha, margins.power)
            if failed:
                row["verdict"] = f"ERROR: provenance check failed for {len(failed)} of {len(runs)} runs (see provenance.tsv)"
            rows.append({"group": " ".join(f"{k}={v}" for k, v in swept.items()) or "all", "metric": metric, **row,
                         "deltas": " ".join(f"{d - b:+.4g}" for d, b in pairs),
                         "mixed_hardware_runs": len(mixed_runs)})
    return rows


def mean_ci95(values: list[float]) -> dict:
    """Mean, SD and the t-based 95% CI of the mean (None where fewer than two values or no spread)."""
    row = {"mean": statistics.fmean(values) if values else None, "sd": None, "ci95_low": None, "ci95_high": None}
    if len(values) > 1 and statistics.stdev(values) > 0:
        ci = stats.ttest_1samp(values, 0.0).confidence_interval(0.95)
        row |= {"sd": statistics.stdev(values), "ci95_low": float(ci.low), "ci95_high": float(ci.high)}
    return row


def finetune_size_rows(results: list[RunResult]) -> list[dict]:
    """Spearman against training-set size per method, over the pinned twins' fine-tuning sweeps
    (runs x replicates; the hopping twins fine-tune copies of the same question): mean with its
    95% CI across those fits, and for a baseline the paired difference pretrained - baseline on
    the same draws, averaged over each run's replicates, then mean and 95% CI over the runs (the
    replicates' draws are the same for every run, so runs, not fits, are the independent units):
    "pretrained beats it" where that CI is above 0. A fit whose predictions were constant has no Spearman; `fits` counts those that have one."""
    values: dict[tuple[str, int], dict[tuple[str, int], float]] = {}
    for r in results:
        if r.variant == "baseline":
            for row in r.finetune.get("sweep", []):
                found = values.setdefault((row["method"], row["n_train"]), {})
                if row["spearman"] is not None:
                    found[(r.run_id, row["replicate"])] = row["spearman"]
    rows = []
    for (method, size), found in sorted(values.items(), key=lambda item: (item[0][1], METHODS.index(item[0][0]))):
        spread = mean_ci95(list(found.values()))
        row = {"method": method, "n_train": size, "fits": len(found), "mean_spearman": spread.pop("mean"), **spread}
        pretrained = values.get(("pretrained", size), {}) if method != "pretrained" else {}
        per_run: dict[str, list[float]] = {}
        for (run, replicate), rho in found.items():
            if (run, replicate) in pretrained:
                per_run.setdefault(run, []).append(pretrained[(run, replicate)] - rho)
        paired = mean_ci95([statistics.fmean(deltas) for deltas in per_run.values()])
        rows.append(row | {f"pretrained_minus_{key}": value for key, value in paired.items() if key != "sd"})
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

