"""Figures for the comparison: loss curves coloured by site, a site timeline, epoch time per site,
fine-tuning against training-set size (the equivalence study's figure is chunked_training's,
chunked_training.equivalence_figure)."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # jobs have no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from .compare import VARIANTS, RunResult  # noqa: E402


def site_colours(results: list[RunResult]) -> dict[str, tuple]:
    sites = sorted({e["site"] for r in results for e in r.state["history"]} | {s["site"] for r in results for s in r.state["segments"]})
    palette = plt.get_cmap("tab10")
    return {site: palette(i % 10) for i, site in enumerate(sites)}


def short(run_id: str) -> str:
    return run_id[:8]


def loss_curves(results: list[RunResult], path: Path) -> None:
    """Training loss per epoch (line per run, points coloured by the site that ran the epoch)
    and validation loss after each chunk (open squares)."""
    colours = site_colours(results)
    fig, axes = plt.subplots(1, len(VARIANTS), figsize=(11, 4), sharey=True, layout="constrained")
    for ax, variant in zip(axes, VARIANTS):
        for r in (r for r in results if r.variant == variant):
            epochs = [e["epoch"] for e in r.state["history"]]
            ax.plot(epochs, [e["train_loss"] for e in r.state["history"]], color="0.6", linewidth=1, zorder=1)
            ax.scatter(epochs, [e["train_loss"] for e in r.state["history"]], c=[colours[e["site"]] for e in r.state["history"]], zorder=2, s=30)
            ax.plot([ev["epoch"] for ev in r.evaluations], [ev["val_loss"] for ev in r.evaluations], "s--", mfc="none", color="0.3", linewidth=0.8, zorder=1)
            ax.annotate(short(r.run_id), (epochs[-1], r.state["history"][-1]["train_loss"]), fontsize=7, xytext=(4, 0), textcoords="offset points")
        ax.set_title(variant)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("loss (MSE, z-scored terms)")
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=c, label=s) for s, c in colours.items()]
    handles.append(plt.Line2D([], [], marker="s", linestyle="--", mfc="none", color="0.3", label="validation"))
    fig.legend(handles=handles, loc="outside right center", fontsize=8)
    save(fig, path)


def site_timeline(results: list[RunResult], path: Path) -> None:
    """Gantt chart: each run's chunk segments on the wall clock, coloured by site."""
    colours = site_colours(results)
    start = min(s["started"] for r in results for s in r.state["segments"])
    fig, ax = plt.subplots(figsize=(11, 0.5 * len(results) + 1.5))
    labels = []
    for row, r in enumerate(sorted(results, key=lambda r: (r.variant, r.run_id))):
        labels.append(f"{short(r.run_id)} {r.variant}")
        for s in r.state["segments"]:
            ax.barh(row, s["finished"] - s["started"], left=s["started"] - start, color=colours[s["site"]], edgecolor="black", linewidth=0.5)
            ax.text(s["started"] - start, row, f" {s['chunk']}", va="center", fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("seconds since the first chunk started (label: chunk)")
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c, label=s) for s, c in colours.items()], loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    save(fig, path)


def epoch_time_per_site(results: list[RunResult], path: Path) -> None:
    """Distribution of epoch wall times on each site (distributed and baseline runs together)."""
    colours = site_colours(results)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, site in enumerate(colours):
        times = [e["wall_s"] for r in results for e in r.state["history"] if e["site"] == site]
        ax.boxplot([times], positions=[i], widths=0.5, patch_artist=True, boxprops={"facecolor": colours[site], "alpha": 0.5})
        ax.scatter([i] * len(times), times, color="black", s=12, zorder=3)  # every epoch, as few may run on a site
    ax.set_xticks(range(len(colours)), list(colours), rotation=20)
    ax.set_ylabel("epoch wall time (s)")
    ax.grid(axis="y", alpha=0.3)
    save(fig, path)


def finetune_sizes(rows: list[dict], path: Path) -> None:
    """Spearman rho on the test split against training-set size, one line per method, 95% CI bars."""
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    for method in dict.fromkeys(row["method"] for row in rows):
        mine = [row for row in rows if row["method"] == method and row["mean_spearman"] is not None]
        sizes, means = [row["n_train"] for row in mine], [row["mean_spearman"] for row in mine]
        errors = [[m - (row["ci95_low"] if row["ci95_low"] is not None else m) for m, row in zip(means, mine)],
                  [(row["ci95_high"] if row["ci95_high"] is not None else m) - m for m, row in zip(means, mine)]]
        ax.errorbar(sizes, means, yerr=errors, marker="o", capsize=3, label=method)
    ax.set_xscale("log")
    ax.set_xlabel("experimental variants for training (incl. validation)")
    ax.set_ylabel("Spearman rho, test split (mean, 95% CI)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, path)


def save(fig, path: Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
