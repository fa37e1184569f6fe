"""The plan a run follows, as `snakemake -n`, `htcannex annex plan` and a run's start print it.

Every job of a rotated rule is placed with placement.place (attempt 1), exactly as run_job will
place it. The plan shows, per rule, the run x chunk -> site table, a site marked `*` where the
rotation's own site was skipped and `!` where no site can run the job, each skip and impossible
job with its reason; then the plan as a budget: per site the jobs placed, their runtime against
the annex lifetime, the annexes that implies and their core- and GPU-hours against the profile's
core_hour_budget.

Annexes implied at a site: its jobs' runtimes summed (a job without `runtime` counts a whole
lifetime), divided by what one annex runs in its lifetime (nodes x the jobs a node holds at once
by cpus and GPUs), rounded up; at least one for a site with any job. Pool sites and manual annexes
(created by hand) are shown but not counted against the budget, which guards the annexes
htcannex requests.
"""
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from snakemake_executor_plugin_htcannex.sites.catalogue import Catalogue
from snakemake_executor_plugin_htcannex.sites.placement import Decision, place
from snakemake_executor_plugin_htcannex.sites.rotation import Rotation, run_order_key
from snakemake_executor_plugin_htcannex.sites.site import ResourceRequest, Site, SiteKind
from snakemake_executor_plugin_htcannex.submit.request import plan_request
from snakemake_executor_plugin_htcannex.submit_language import SubmitValueError
from snakemake_executor_plugin_htcannex.units import format_duration_s

HEADING = "htcannex plan (run x chunk -> site):"
SKIPPED_MARK = "*"
IMPOSSIBLE_MARK = "!"


@dataclass(frozen=True)
class PlannedJob:
    """One job of a rotated rule and where its first attempt goes (its request as that site
    admits it: decision.request)."""

    rule: str
    run: str
    chunk: int
    decision: Decision | None
    problem: str | None = None  # a resource that is not a valid request

    @property
    def cell(self) -> str:
        if self.decision is None or self.decision.impossible:
            return IMPOSSIBLE_MARK
        return self.decision.site.name + (SKIPPED_MARK if self.decision.skipped else "")


def plan_jobs(catalogue: Catalogue, jobs: Iterable[tuple[str, Mapping, Mapping, int]]) -> list[PlannedJob]:
    """The first-attempt placement of each job of a rotated rule among (rule, wildcards,
    resources, threads). Raises rotation.RotationError for a rotated rule without its wildcards."""
    rotation = catalogue.rotation
    planned = []
    requests: dict = {}  # the jobs of a sweep share a few resource sets: each is turned into a request once
    verdicts: dict = {}  # and judged once per site (placement.place)
    for rule, wildcards, resources, threads in jobs:
        if rotation.policy_for(rule).policy == "any":
            continue
        key = (rule, tuple((name, str(value)) for name, value in resources.items()), threads)
        try:
            if key not in requests:
                requests[key] = plan_request(rule, resources, threads)
            request = requests[key]
        except SubmitValueError as error:
            chosen = rotation.place(rule, wildcards)
            planned.append(PlannedJob(rule, chosen.run, chosen.chunk, None, problem=str(error)))
            continue
        decision = place(rotation, catalogue.sites, rule, wildcards, 1, request, verdicts=verdicts)
        planned.append(PlannedJob(rule, decision.placement.run, decision.placement.chunk, decision))
    return planned


def plan_report(catalogue: Catalogue, jobs: Iterable[tuple[str, Mapping, Mapping, int]], spent: float = 0.0) -> str:
    """The whole plan with its heading; "" when no job of a rotated rule is among the jobs. `spent`:
    the core-hours this working directory's annex requests already cost (annex.AnnexLedger)."""
    planned = plan_jobs(catalogue, jobs)
    return render_plan(catalogue, planned, spent) if planned else ""


def render_plan(catalogue: Catalogue, planned: list[PlannedJob], spent: float) -> str:
    """The tables, skips and impossible jobs, then the budget, of planned jobs."""
    return "\n\n".join([HEADING + "\n" + render_tables(catalogue.rotation, planned),
                        render_budget(catalogue, planned, spent)])


def render_tables(rotation: Rotation, planned: list[PlannedJob]) -> str:
    """The run x chunk -> site table per rule, each followed by its skips and impossible jobs."""
    blocks = []
    for rule in sorted({job.rule for job in planned}):
        jobs = [job for job in planned if job.rule == rule]
        runs: dict[str, dict[int, str]] = {}
        for job in jobs:
            runs.setdefault(job.run, {})[job.chunk] = job.cell
        chunks = sorted({job.chunk for job in jobs})
        header = [f"{rotation.run_wildcard} \\ {rotation.chunk_wildcard}", *map(str, chunks)]
        rows = [header] + [[run, *(runs[run].get(chunk, "-") for chunk in chunks)]
                           for run in sorted(runs, key=run_order_key)]
        widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
        policy = rotation.policy_for(rule)
        blocks.append("\n".join([f"rule {rule}: {policy.policy} over {', '.join(policy.sites)}", *lines,
                                 *_notes(jobs)]))
    return "\n\n".join(blocks)


def _notes(jobs: list[PlannedJob]) -> list[str]:
    """Each skip and each impossible job with its reason, jobs with the same reason on one line, in
    run and chunk order (Snakemake lists jobs in a different order from one run to the next), or
    "all N jobs" where every job of the rule has it."""
    by_reason: dict[tuple[str, str], list[str]] = {}
    for job in sorted(jobs, key=lambda job: (run_order_key(job.run), job.chunk)):
        where = f"{job.run}/{job.chunk}"
        if job.problem:
            by_reason.setdefault((IMPOSSIBLE_MARK, job.problem), []).append(where)
            continue
        for skip in job.decision.skipped:
            if not job.decision.impossible:
                by_reason.setdefault((SKIPPED_MARK, f"{skip.site} skipped: {skip.reason}"), []).append(where)
        if job.decision.impossible:
            by_reason.setdefault((IMPOSSIBLE_MARK, f"cannot run: {job.decision.impossible}"), []).append(where)
    every = len(jobs)
    return [f"  {mark} {f'all {every} jobs' if len(where) == every > 1 else 'run/chunk ' + ', '.join(where)}: {reason}"
            for (mark, reason), where in by_reason.items()]


def render_budget(catalogue: Catalogue, planned: list[PlannedJob], spent: float) -> str:
    """Per site: jobs placed, their runtime against the annex lifetime, the annexes and the core-
    and GPU-hours that implies; then the requested annexes' total, with what was spent already,
    against core_hour_budget."""
    by_site: dict[str, list[PlannedJob]] = {}
    for job in planned:
        if job.decision is not None and job.decision.site is not None:
            by_site.setdefault(job.decision.site.name, []).append(job)
    header = ["site", "creates", "jobs", "longest job", "lifetime", "annexes", "core-hours", "GPU-hours"]
    rows, charged_core, charged_gpu = [header], 0.0, 0.0
    for name in sorted(by_site):
        site, jobs = catalogue.sites[name], by_site[name]
        requests = [job.decision.request for job in jobs]
        longest = max((request.runtime_s or 0 for request in requests), default=0)
        annexes, core_hours, gpu_hours = site_cost(site, requests)
        if site.kind is SiteKind.ANNEX and not site.manual:
            charged_core, charged_gpu = charged_core + core_hours, charged_gpu + gpu_hours
        rows.append([name, _creator(site), str(len(jobs)), format_duration_s(longest) if longest else "?",
                     format_duration_s(site.lifetime_s) if site.lifetime_s else "-",
                     str(annexes) if annexes else "-", f"{core_hours:g}", f"{gpu_hours:g}"])
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    table = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    budget = catalogue.annex.core_hour_budget
    verdict = (f"{charged_core:g} core-hours ({charged_gpu:g} GPU-hours) of annexes htcannex requests, "
               f"core_hour_budget {budget:g}")
    if spent:
        verdict += f" ({spent:g} spent already from this directory)"
    if charged_core + spent > budget:
        verdict += (": OVER BUDGET. Annexes past the budget are not requested; their jobs wait idle_timeout "
                    "and move to the next site of their rotation. Fix: raise annex.core_hour_budget, shorten "
                    "lifetimes, or plan fewer chunks")
    return "\n".join(["htcannex budget (the plan's annexes; ? = no runtime given, a whole lifetime is counted):",
                      *table, verdict])


def _creator(site: Site) -> str:
    if site.kind is SiteKind.POOL:
        return "pool"
    return "by hand" if site.manual else "htcannex"


def site_cost(site: Site, requests: list[ResourceRequest]) -> tuple[int, float, float]:
    """(annexes, core-hours, GPU-hours) that running `requests` at `site` implies (module docstring);
    a pool site: no annex, the jobs' own cpu and GPU hours."""
    if site.kind is SiteKind.POOL:
        hours = [(request.runtime_s or 0) / 3600 for request in requests]
        return (0, sum(h * r.cpus for h, r in zip(hours, requests)),
                sum(h * r.gpus for h, r in zip(hours, requests)))
    lifetime_s = site.lifetime_s
    cpus = max(request.cpus for request in requests)
    gpus = max(request.gpus for request in requests)
    per_node = (site.cpus or cpus) // cpus
    if gpus:
        per_node = min(per_node, site.gpus // gpus)
    at_once = site.nodes * max(per_node, 1)
    work_s = sum(min(request.runtime_s or lifetime_s, lifetime_s) for request in requests)
    annexes = max(1, math.ceil(work_s / (lifetime_s * at_once)))
    lifetime_h = lifetime_s / 3600
    return annexes, annexes * site.annex_core_hours, annexes * site.nodes * site.gpus * lifetime_h
