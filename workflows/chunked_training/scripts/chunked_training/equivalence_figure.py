"""The equivalence study's figure (protein_lm's and an MLDAG experiment's): per seed group the
paired deltas, their mean with its CI, the margin and the verdict, one panel per metric."""
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the access point may have no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from .equivalence import ERROR, FAILING, outcome  # noqa: E402


def figure(rows: list[dict], alpha: float, path: Path) -> None:
    """One panel per metric: each seed group's paired deltas (dots), their mean with its
    (1 - 2 alpha) CI (bar, red where the verdict fails the run), the equivalence margin (shaded)
    and the verdict, wrapped under its group."""
    metrics = list(dict.fromkeys(row["metric"] for row in rows))
    per_panel = max(1, len(rows) // len(metrics))
    fig, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 1.0 + 1.3 * per_panel), squeeze=False, layout="constrained")
    for ax, metric in zip(axes[0], metrics):
        mine = [row for row in rows if row["metric"] == metric]
        margin = mine[0]["margin"]
        ax.axvspan(-margin, margin, color="tab:green", alpha=0.12, label=f"margin +-{margin:g}")
        ax.axvline(0, color="0.5", linewidth=0.8)
        for y, row in enumerate(mine):
            deltas = [float(d) for d in row["deltas"].split()]
            ax.scatter(deltas, [y] * len(deltas), color="0.4", s=14, zorder=2)
            failing = outcome(row["verdict"]) in (ERROR, *FAILING)
            if row["ci_low"] is not None:
                ax.errorbar(row["mean_delta"], y + 0.15, xerr=[[row["mean_delta"] - row["ci_low"]], [row["ci_high"] - row["mean_delta"]]],
                            fmt="D", color="tab:red" if failing else "black", capsize=4, zorder=3)
            ax.annotate(textwrap.fill(row["verdict"], 70), (0.01, y - 0.12), xycoords=("axes fraction", "data"), fontsize=7,
                        va="bottom", color="tab:red" if failing else "black")
        ax.set_yticks(range(len(mine)), [f"{row['group']} (n={row['pairs']})" for row in mine], fontsize=8)
        ax.set_ylim(len(mine) - 0.5, -1.0)  # first group on top, its verdict above its dots
        # A few ticks: the deltas span a narrow range, and default ticks at every 0.005 overlap.
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
        ax.tick_params(axis="x", labelsize=8)
        ax.set_xlabel(f"{metric}: distributed - baseline (same seed); mean, {100 * (1 - 2 * alpha):g}% CI")
        ax.legend(fontsize=7, loc="upper right")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
