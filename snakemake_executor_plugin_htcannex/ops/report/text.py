"""The report as a terminal summary and as TSV (one row per job, for scripts)."""
import csv
import io
from typing import Optional

from snakemake_executor_plugin_htcannex.ops.board import columns, duration
from snakemake_executor_plugin_htcannex.secrets import redact
from snakemake_executor_plugin_htcannex.ops.report import Report
from snakemake_executor_plugin_htcannex.ops.report.advice import flagged
from snakemake_executor_plugin_htcannex.ops.report.figures import JobFigures


def summary(report: Report) -> str:
    jobs = report.jobs
    lines = [f"htcannex report of {report.log}: {len(jobs)} jobs, "
             f"{sum(job.state == 'done' for job in jobs)} done, {sum(job.runs for job in jobs)} runs, "
             f"{sum(job.holds for job in jobs)} holds, {sum(job.killed for job in jobs)} killed by SIGKILL, "
             f"{sum(job.evictions for job in jobs)} evictions, "
             f"{sum(job.checkpoints for job in jobs)} self-checkpoints"]
    hours = f"core-hours {report.core_hours:.2f}, GPU-hours {report.gpu_hours:.2f}"
    if report.core_hour_budget:
        hours += f" (annex budget {report.core_hour_budget:g} core-hours: {report.core_hours / report.core_hour_budget:.1%})"
    lines += [hours, ""]
    table = [["JOB", "CHUNK", "SITE", "STATE", "QUEUE", "ANNEX", "HELD", "XFER IN", "COMPUTE", "XFER OUT",
              "BADPUT", "MEM PEAK/REQ", "CPU EFF", "NOTE"]]
    for job in jobs:
        table.append([job.job, job.chunk_key, job.site or "-", job.state, duration(job.queue_wait_s),
                      duration(job.annex_wait_s), duration(job.held_s), duration(job.transfer_in_s),
                      duration(job.compute_s), duration(job.transfer_out_s), duration(job.badput_s),
                      f"{_mb(job.memory_peak_mb)}/{_mb(job.memory_requested_mb)}", _percent(job.cpu_efficiency),
                      _note(job)])
    lines += columns(table)
    if any(chunk.attempts > 1 for chunk in report.chunks):
        lines += ["", "per chunk (its attempts added up)"]
        chunks = [["CHUNK", "ATTEMPTS", "SITES", "STATE", "QUEUE", "ANNEX", "HELD", "TRANSFER", "COMPUTE",
                   "BADPUT", "LOST ATTEMPTS", "END TO END"]]
        for chunk in report.chunks:
            chunks.append([chunk.chunk_key, str(chunk.attempts), chunk.sites, chunk.state,
                           *(duration(seconds) for seconds in (
                               chunk.queue_wait_s, chunk.annex_wait_s, chunk.held_s, chunk.transfer_s,
                               chunk.compute_s, chunk.badput_s, chunk.lost_attempts_s, chunk.end_to_end_s))])
        lines += columns(chunks)
    epoch = f", epoch = chunk / {report.epochs_per_job}" if report.epochs_per_job else ""
    lines += ["", f"per site (chunk = compute time of a finished job{epoch})"]
    sites = [["SITE", "JOBS", "DONE", "CHUNK MEDIAN", "MIN", "MAX", "EPOCH", "QUEUE MEDIAN", "BADPUT",
              "GOODPUT", "CPU EFF", "CORE-H", "GPU-H"]]
    for site in report.sites:
        sites.append([site.site, str(site.jobs), str(site.done), duration(site.chunk_median_s),
                      duration(site.chunk_min_s), duration(site.chunk_max_s), duration(site.epoch_median_s),
                      duration(site.queue_wait_median_s), duration(site.badput_s), _percent(site.goodput),
                      _percent(site.cpu_efficiency), f"{site.core_hours:.2f}", f"{site.gpu_hours:.2f}"])
    lines += columns(sites)
    lines += ["", "right-sizing (peak + headroom where use is low or a job was held)"]
    advice = flagged(report.advice)
    lines += [f"  {item.text}" for item in advice] if advice else ["  requests fit what the jobs used"]
    return redact("\n".join(lines))


def tsv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(JobFigures.columns())
    for job in report.jobs:
        writer.writerow(["" if value is None else _cell(value) for value in
                         (getattr(job, name) for name in JobFigures.columns())])
    return redact(out.getvalue())


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return " ".join(str(value).split())  # a reason with tabs or newlines stays one cell


def _note(job: JobFigures) -> str:
    parts = []
    if job.runs > 1:
        parts.append(f"{job.runs} runs")
    if job.hold_codes:
        parts.append(f"held {job.hold_codes}")
    if job.killed:
        parts.append("SIGKILL, not held")
    if job.checkpoints:
        parts.append(f"{job.checkpoints} ckpt")
    return ", ".join(parts)


def _mb(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:.0f}"


def _percent(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.0%}"
