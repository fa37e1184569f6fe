"""The HTML report and its figures (matplotlib, drawn off-screen).

Three figures, each also written on its own (PNG) for `snakemake --report`:
- sites.png: per-site box plots of chunk (or epoch) compute times;
- timeline.png: per job, stacked: queue wait, annex wait, held, input transfer,
  compute (badput hatched), output transfer;
- requests.png: requested vs allocated vs used memory and CPUs per job.
Per-job figures show at most MAX_JOBS_SHOWN jobs (those that took longest, in submit
order; the title says so): a bar per job of a 5,000-job log is neither readable nor
cheap (minutes and gigabytes to draw).
"""
import base64
import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the off-screen backend)

from snakemake_executor_plugin_htcannex.secrets import redact  # noqa: E402
from snakemake_executor_plugin_htcannex.ops.report import Report  # noqa: E402
from snakemake_executor_plugin_htcannex.ops.report.advice import flagged  # noqa: E402
from snakemake_executor_plugin_htcannex.ops.report.per_site import chunk_times  # noqa: E402
from snakemake_executor_plugin_htcannex.ops.report.text import summary  # noqa: E402

FIGURES = ("sites", "timeline", "requests")
MAX_JOBS_SHOWN = 60
_PHASES = (("queue wait", "queue_wait_s", "#bbbbbb"), ("annex wait", "annex_wait_s", "#9ecae1"),
           ("held", "held_s", "#fc9272"), ("transfer in", "transfer_in_s", "#fdd0a2"),
           ("compute", "compute_s", "#74c476"), ("transfer out", "transfer_out_s", "#fd8d3c"))


def draw(report: Report) -> dict:
    """name -> matplotlib Figure, for each of FIGURES."""
    return {"sites": _sites(report), "timeline": _timeline(report), "requests": _requests(report)}


def write_figures(report: Report, directory: Path) -> list:
    """Each figure as directory/NAME.png; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, figure in draw(report).items():
        path = directory / f"{name}.png"
        figure.savefig(path, dpi=100, bbox_inches="tight")
        plt.close(figure)
        paths.append(path)
    return paths


def page(report: Report) -> str:
    images = []
    for name, figure in draw(report).items():
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        plt.close(figure)
        images.append(f'<h2>{name}</h2><img alt="{name}" src="data:image/png;base64,'
                      f'{base64.b64encode(buffer.getvalue()).decode()}">')
    advice = "".join(f"<li>{html.escape(item.text)}</li>" for item in flagged(report.advice))
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>htcannex report</title></head><body>"
            f"<h1>htcannex report</h1><p>{html.escape(redact(report.log))}</p>"
            f"<h2>right-sizing</h2><ul>{advice or '<li>requests fit what the jobs used</li>'}</ul>"
            + "".join(images)
            + f"<h2>summary</h2><pre>{html.escape(summary(report))}</pre></body></html>")


def _sites(report: Report):
    times = chunk_times(report.jobs, report.epochs_per_job)
    figure, axes = plt.subplots(figsize=(max(4, 1.5 * len(times) + 2), 3.5))
    what = "epoch" if report.epochs_per_job else "chunk"
    if times:
        names = sorted(times)
        axes.boxplot([times[name] for name in names], tick_labels=names)
    else:
        axes.text(0.5, 0.5, "no finished job yet", ha="center", va="center", transform=axes.transAxes)
    axes.set_ylabel(f"{what} compute time (s)")
    axes.set_title(f"{what} time per site")
    return figure


def _shown(report: Report) -> tuple:
    """(the jobs to draw, a title suffix saying which when not all)."""
    jobs = report.jobs
    if len(jobs) <= MAX_JOBS_SHOWN:
        return jobs, ""
    longest = set(map(id, sorted(jobs, key=_total_s, reverse=True)[:MAX_JOBS_SHOWN]))
    return [job for job in jobs if id(job) in longest], f" (the {MAX_JOBS_SHOWN} longest of {len(jobs)} jobs)"


def _total_s(job) -> float:
    return sum(getattr(job, name) for _, name, _ in _PHASES)


def _timeline(report: Report):
    jobs, which = _shown(report)
    figure, axes = plt.subplots(figsize=(9, max(2.5, 0.3 * len(jobs) + 1.5)))
    labels = [f"{job.chunk_key} ({job.job})" if job.chunk_key != job.job else job.job for job in jobs]
    left = [0.0] * len(jobs)
    for label, name, colour in _PHASES:
        widths = [getattr(job, name) for job in jobs]
        axes.barh(range(len(jobs)), widths, left=left, color=colour, label=label)
        if name == "compute_s":
            badput = [job.badput_s for job in jobs]
            axes.barh(range(len(jobs)), badput, left=left, color="none", edgecolor="#a50f15", hatch="///",
                      label="badput (lost compute)")
        left = [start + width for start, width in zip(left, widths)]
    axes.set_yticks(range(len(jobs)), labels, fontsize=7)
    axes.invert_yaxis()
    axes.set_xlabel("seconds")
    axes.set_title("where each job's time went" + which)
    axes.legend(fontsize=7, loc="lower right")
    return figure


def _requests(report: Report):
    jobs, which = _shown(report)
    figure, (memory, cpus) = plt.subplots(1, 2, figsize=(10, max(2.5, 0.3 * len(jobs) + 1.5)), sharey=True)
    positions = range(len(jobs))
    for axes, fields, unit in ((memory, ("memory_requested_mb", "memory_allocated_mb", "memory_peak_mb"), "MB"),
                               (cpus, ("cpus_requested", "cpus_allocated", "cpus_used"), "cores")):
        height = 0.27
        for offset, (field, label) in enumerate(zip(fields, ("requested", "allocated", "used (peak)"))):
            values = [getattr(job, field) or 0 for job in jobs]
            axes.barh([position + (offset - 1) * height for position in positions], values, height=height,
                      label=label)
        axes.set_xlabel(unit)
        axes.legend(fontsize=7)
    memory.set_title("memory" + which)
    cpus.set_title("CPUs")
    memory.set_yticks(list(positions), [job.job for job in jobs], fontsize=7)
    memory.invert_yaxis()
    return figure
