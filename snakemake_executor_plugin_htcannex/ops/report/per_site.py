"""Per-site aggregates of the jobs' figures: chunk and epoch times, efficiency, badput, core- and GPU-hours."""
from dataclasses import dataclass
from statistics import median
from typing import Optional



@dataclass
class SiteSummary:
    site: str
    jobs: int
    done: int
    chunk_median_s: Optional[float]  # compute of the jobs that finished there
    chunk_min_s: Optional[float]
    chunk_max_s: Optional[float]
    epoch_median_s: Optional[float]  # chunk compute / epochs_per_job, where known
    queue_wait_median_s: Optional[float]
    transfer_s: float
    compute_s: float
    badput_s: float
    goodput: Optional[float]  # (compute - badput) / compute
    cpu_efficiency: Optional[float]  # cpu seconds / (compute x requested cpus), jobs that report both
    holds: int
    evictions: int
    checkpoints: int
    core_hours: float
    gpu_hours: float
    annex_core_hours: Optional[float] = None  # what one annex there costs (the catalogue), where known


def site_summaries(jobs: list, epochs_per_job: Optional[int] = None,
                   annex_core_hours: Optional[dict] = None) -> list:
    by_site: dict = {}
    for job in jobs:
        by_site.setdefault(job.site or "(unknown)", []).append(job)
    return [_summary(site, members, epochs_per_job, (annex_core_hours or {}).get(site))
            for site, members in sorted(by_site.items())]


def _summary(site: str, jobs: list, epochs_per_job: Optional[int], annex_core_hours: Optional[float]) -> SiteSummary:
    chunks = [job.compute_s for job in jobs if job.state == "done"]
    waits = [job.queue_wait_s for job in jobs if job.runs]
    compute = sum(job.compute_s for job in jobs)
    badput = sum(job.badput_s for job in jobs)
    measured = [job for job in jobs if job.cpu_efficiency is not None]
    return SiteSummary(
        site=site, jobs=len(jobs), done=len(chunks),
        chunk_median_s=median(chunks) if chunks else None,
        chunk_min_s=min(chunks) if chunks else None, chunk_max_s=max(chunks) if chunks else None,
        epoch_median_s=median(chunks) / epochs_per_job if chunks and epochs_per_job else None,
        queue_wait_median_s=median(waits) if waits else None,
        transfer_s=sum(job.transfer_in_s + job.transfer_out_s for job in jobs),
        compute_s=compute, badput_s=badput,
        goodput=(compute - badput) / compute if compute else None,
        cpu_efficiency=(sum(job.cpu_s for job in measured)
                        / sum(job.compute_s * job.cpus_requested for job in measured)) if measured else None,
        holds=sum(job.holds for job in jobs), evictions=sum(job.evictions for job in jobs),
        checkpoints=sum(job.checkpoints for job in jobs),
        core_hours=sum(job.core_hours for job in jobs), gpu_hours=sum(job.gpu_hours for job in jobs),
        annex_core_hours=annex_core_hours,
    )


def chunk_times(jobs: list, epochs_per_job: Optional[int] = None) -> dict:
    """site -> the compute seconds of its finished jobs (per epoch where epochs_per_job is known)."""
    times: dict = {}
    for job in jobs:
        if job.state == "done":
            times.setdefault(job.site or "(unknown)", []).append(
                job.compute_s / epochs_per_job if epochs_per_job else job.compute_s)
    return times

