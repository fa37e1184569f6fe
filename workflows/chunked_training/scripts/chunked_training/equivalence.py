"""The paired equivalence study of one metric: is the treatment (a hopping run) equivalent to its
control (the pinned twin of the same seed) within a margin fixed before the run?

Deltas d_i = treatment_i - control_i; their mean with its (1 - 2 alpha) t confidence interval;
two one-sided tests (TOST, statsmodels' ttost_paired) against +-margin. The verdict says what
the data say, and its first words are its outcome:
- "identical": every delta is 0 (bitwise twins);
- "equivalent": the CI lies inside +-margin (TOST rejects at alpha);
- "not equivalent": the whole CI lies beyond the margin;
- "beyond the margin": the mean delta is at or beyond the margin, the CI reaches inside it: the
  seeds are too few to confirm, and it says how many would (at the configured power);
- "insufficient seeds": the mean delta is inside the margin and the CI straddles the margin;
  with the seeds TOST would need.
Seeds needed: statsmodels' TTestPower for the one-sided test against the nearer margin with the
observed mean and SD as the truth, at the configured power (for equivalence a lower bound: TOST
must also pass on the other side).

Only numpy, scipy and statsmodels (htcannex's `train` extra): chunked_training's compare (an MLDAG
experiment's study) and protein_lm's, which is built on chunked_training, both use it
(`from chunked_training.equivalence import equivalence, Margins, FAILING`).
"""

import math
from dataclasses import dataclass

import numpy as np

try:
    from scipy import stats
    from statsmodels.stats.power import TTestPower
    from statsmodels.stats.weightstats import ttost_paired
except ImportError as missing:
    raise ImportError(f"the equivalence study needs scipy and statsmodels ({missing}): install htcannex with its "
                      "train extra, pip install 'snakemake-executor-plugin-htcannex[train]'") from missing

IDENTICAL, EQUIVALENT, NOT_EQUIVALENT, BEYOND, INSUFFICIENT = (
    "identical", "equivalent", "not equivalent", "beyond the margin", "insufficient seeds")
ERROR = "ERROR"
FAILING = (NOT_EQUIVALENT, BEYOND)  # outcomes that fail a run unless real differences are allowed


@dataclass(frozen=True)
class Margins:
    """Set in the config before the run (compare.margin, compare.alpha, compare.power)."""

    margin: dict   # metric -> equivalence margin on the paired delta, in the metric's units
    alpha: float   # of each one-sided test; the CI shown is the (1 - 2 alpha) one
    power: float   # for the number of seeds needed


def outcome(verdict: str) -> str:
    """The outcome a verdict starts with."""
    return next(word for word in (ERROR, IDENTICAL, NOT_EQUIVALENT, EQUIVALENT, BEYOND, INSUFFICIENT) if verdict.startswith(word))


def equivalence(treatment: list[float], control: list[float], margin: float, alpha: float, power: float) -> dict:
    """The paired study of one metric: mean delta, its (1 - 2 alpha) CI, TOST p, seeds needed, verdict."""
    x1, x2 = np.asarray(treatment, dtype=float), np.asarray(control, dtype=float)
    deltas = x1 - x2
    n = len(deltas)
    mean = float(deltas.mean()) if n else None
    row = {"pairs": n, "margin": margin, "mean_delta": mean, "sd_delta": None,
           "ci_low": None, "ci_high": None, "tost_p": None, "seeds_needed": None}
    if n and not deltas.any():
        return row | {"sd_delta": 0.0, "ci_low": 0.0, "ci_high": 0.0, "verdict": f"{IDENTICAL} (every delta 0)"}
    if n < 2:
        spread = f"{n} pair: no spread; 2 or more needed"
        if n and abs(mean) >= margin:
            return row | {"verdict": f"{BEYOND} (delta {mean:+.3g}, margin {margin:g}; n too small to confirm: {spread})"}
        return row | {"verdict": f"{INSUFFICIENT} ({spread})"}
    sd = float(deltas.std(ddof=1))
    level = f"{100 * (1 - 2 * alpha):g}% CI"
    if sd == 0:  # equal non-zero deltas: no spread, the CI is the point
        low = high = mean
        p = 0.0 if abs(mean) < margin else 1.0
    else:
        ci = stats.ttest_1samp(deltas, 0.0).confidence_interval(1 - 2 * alpha)
        low, high = float(ci.low), float(ci.high)
        p = float(ttost_paired(x1, x2, -margin, margin)[0])
    needed = seeds_needed(mean, sd, margin, alpha, power)
    row |= {"sd_delta": sd, "ci_low": low, "ci_high": high, "tost_p": p, "seeds_needed": needed}
    interval = f"{level} [{low:+.3g}, {high:+.3g}]"
    if p < alpha:
        verdict = f"{EQUIVALENT} ({level} inside +-{margin:g})"
    elif low > margin or high < -margin:
        verdict = f"{NOT_EQUIVALENT} ({interval} beyond the margin +-{margin:g})"
    elif abs(mean) >= margin:
        confirm = f"about {needed} to confirm at SD {sd:.3g}" if needed else "no number confirms a mean on the margin"
        verdict = f"{BEYOND} (mean {mean:+.3g}, margin {margin:g}; n too small to confirm: {interval}; {n} seeds, {confirm})"
    else:
        differs = "; the CI excludes 0" if low > 0 or high < 0 else ""
        verdict = f"{INSUFFICIENT} ({n}; about {needed} needed at SD {sd:.3g}: {interval} straddles +-{margin:g}{differs})"
    return row | {"verdict": verdict}


def seeds_needed(mean: float, sd: float, margin: float, alpha: float, power: float) -> int | None:
    """Pairs for the one-sided test at `alpha` to reach `power` if the true delta were the observed
    mean with the observed SD: inside the margin, that the delta is inside the nearer margin (the
    binding side of TOST); at or beyond it, that it is beyond. None for a mean on the margin."""
    distance = abs(margin - abs(mean))
    if distance == 0:
        return None
    if sd == 0:
        return 2
    effect = distance / sd
    analysis = TTestPower()
    if analysis.power(effect_size=effect, nobs=2, alpha=alpha, alternative="larger") >= power:
        return 2  # the solver looks for n below 2 and fails
    return math.ceil(analysis.solve_power(effect_size=effect, alpha=alpha, power=power, alternative="larger"))


def failed_checks(summary: list[dict], study: list[dict], allow_not_equivalent: bool) -> list[str]:
    """What fails the run, one line each naming the run or seed group and the check: a twin or
    provenance ERROR (a bug, never noise: no setting lets it pass) and, unless real differences
    are allowed (config allow_not_equivalent), a study verdict beyond the margin."""
    reasons = [f"run {row['run']}: twin check: {row['verdict']}" for row in summary if row["verdict"].startswith(ERROR)]
    for row in study:
        kind = outcome(row["verdict"])
        if kind == ERROR or (kind in FAILING and not allow_not_equivalent):
            reasons.append(f"seed group {row['group']}, {row['metric']}: study: {row['verdict']}")
    return reasons
