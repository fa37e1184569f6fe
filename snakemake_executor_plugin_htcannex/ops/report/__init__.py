"""`htcannex report`: what each job and chunk used, waited for, moved and where; per site; advice.

records   the event log read into a record per job (htcondor2.JobEventLog)
figures   a job's figures from its record and (optionally) its job ad
chunks    per chunk: its attempts added up
per_site  aggregates per site
advice    right-sizing: suggested requests from observed peaks with headroom
text      terminal summary, TSV, JSON
html      the HTML report and its figures (matplotlib)
"""
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional

from snakemake_executor_plugin_htcannex.ops.report import advice as advice_
from snakemake_executor_plugin_htcannex.ops.report.chunks import chunk_summaries
from snakemake_executor_plugin_htcannex.ops.report.figures import job_figures
from snakemake_executor_plugin_htcannex.ops.report.per_site import site_summaries
from snakemake_executor_plugin_htcannex.ops.report.records import read_histories


@dataclass
class Report:
    log: str
    generated_at: float
    epochs_per_job: Optional[int]
    jobs: list = field(default_factory=list)  # [figures.JobFigures], submit order
    chunks: list = field(default_factory=list)  # [chunks.ChunkSummary], by first submit
    sites: list = field(default_factory=list)  # [per_site.SiteSummary]
    advice: list = field(default_factory=list)  # [advice.Advice]
    core_hour_budget: Optional[float] = None  # the profile's annex budget, where named

    @property
    def core_hours(self) -> float:
        return sum(job.core_hours for job in self.jobs)

    @property
    def gpu_hours(self) -> float:
        return sum(job.gpu_hours for job in self.jobs)

    def to_json(self) -> str:
        document = asdict(self)
        document.update(core_hours=self.core_hours, gpu_hours=self.gpu_hours)
        return json.dumps(document, indent=1)


def build_report(log: Path, ads: Optional[dict] = None, *, now: Optional[float] = None,
                 epochs_per_job: Optional[int] = None, headroom: float = advice_.DEFAULT_HEADROOM,
                 threshold: float = advice_.DEFAULT_THRESHOLD, core_hour_budget: Optional[float] = None,
                 annex_core_hours: Optional[dict] = None,
                 step: Callable[[int], None] = lambda done: None) -> Report:
    """The report of one event log; `ads` maps "cluster.proc" to job ads (a list where ids recur)."""
    now = time.time() if now is None else now
    histories = read_histories(Path(log), step)
    jobs = [job_figures(history, _ad_for(history, ads or {}), now) for history in histories]
    return Report(log=str(log), generated_at=now, epochs_per_job=epochs_per_job, jobs=jobs,
                  chunks=chunk_summaries(jobs),
                  sites=site_summaries(jobs, epochs_per_job, annex_core_hours),
                  advice=advice_.advise(jobs, headroom, threshold), core_hour_budget=core_hour_budget)


def _ad_for(history, ads: dict):
    """The ad of this job; where a restarted pool reused the id, the one queued closest to its submit."""
    candidates = ads.get(history.job_id) or []
    if not isinstance(candidates, list):
        candidates = [candidates]
    if not candidates:
        return None
    return min(candidates, key=lambda ad: abs((ad.get("QDate") or 0) - (history.submitted_at or 0)))
