"""Feasibility first: placement.place skips the sites that cannot run a job, the same way in the
plan and in the run, and a job no site can run is impossible with every site's reason; plan.py
renders the plan with its skips and the budget it implies."""
import pytest

from catalogues import load_with
from snakemake_executor_plugin_htcannex.submit.request import plan_request
from snakemake_executor_plugin_htcannex.sites.placement import place
from snakemake_executor_plugin_htcannex.ops.plan import plan_jobs, plan_report
from snakemake_executor_plugin_htcannex.sites.site import ResourceRequest
from snakemake_executor_plugin_htcannex.submit_language import SubmitValueError

SITES = {
    "a": {"kind": "annex", "facts": "catalogue", "cpus": 2, "memory": "4GB", "max_lifetime": "2h", "lifetime": "1h"},
    "short": {"kind": "annex", "facts": "catalogue", "cpus": 2, "memory": "4GB", "max_lifetime": "2h",
              "lifetime": "10m"},
    "gpu": {"kind": "annex", "facts": "catalogue", "cpus": 4, "memory": "8GB", "gpus": 1, "gpu_type": "A10G",
            "gpu_memory": "23028MB", "max_lifetime": "2h", "lifetime": "1h"},
}


@pytest.fixture
def catalogue(tmp_path):
    def edit(document):
        document["sites"] = SITES
        document["rotation"] = {"train_chunk": {"policy": "round-robin", "sites": ["a", "short", "gpu"]}}
        document["annex"]["core_hour_budget"] = 5
    return load_with(tmp_path, edit)


def chunk(run, k):
    return {"run": str(run), "chunk": str(k)}


def test_a_site_that_cannot_run_the_job_is_skipped_for_the_next_in_rotation_order(catalogue):
    request = ResourceRequest(cpus=1, runtime_s=30 * 60)
    # run 0: chunk 1 is short's turn; its 10 min annex cannot hold a 30 min chunk: gpu, the next, takes it
    decision = place(catalogue.rotation, catalogue.sites, "train_chunk", chunk(0, 1), 1, request)
    assert decision.placement.site == "short" and decision.site.name == "gpu"
    [skip] = decision.skipped
    assert skip.site == "short" and "longer than the annex lifetime at short (10m)" in skip.reason
    # A retry moves on along the rotation, skipping the same way.
    assert place(catalogue.rotation, catalogue.sites, "train_chunk", chunk(0, 0), 2, request).site.name == "gpu"


def test_gpu_memory_is_judged_against_what_the_device_reports(catalogue):
    nominal = ResourceRequest(gpus=1, gpu_memory_mb=24 * 1024)
    decision = place(catalogue.rotation, catalogue.sites, "train_chunk", chunk(0, 2), 1, nominal)
    assert decision.site is None
    assert "it asks for 24GB of GPU memory and gpu GPUs have 23028MB" in decision.impossible
    fits = place(catalogue.rotation, catalogue.sites, "train_chunk", chunk(0, 2), 1,
                 ResourceRequest(gpus=1, gpu_memory_mb=22 * 1024))
    assert fits.site.name == "gpu"


def test_a_job_no_site_can_run_is_impossible_with_every_sites_reason_and_fix(catalogue):
    request = ResourceRequest(cpus=1, gpus=1, gpu_model="H100")
    decision = place(catalogue.rotation, catalogue.sites, "train_chunk", chunk(0, 0), 1, request)
    assert decision.site is None and [skip.site for skip in decision.skipped] == ["a", "short", "gpu"]
    assert "no annex is requested for it" in decision.impossible
    assert "rule train_chunk cannot run at site gpu: it asks for GPU model 'H100' and gpu has A10G" \
        in decision.impossible
    assert "CPU-only queue" in decision.impossible


def test_the_plan_marks_skips_and_impossible_jobs_and_adds_up_the_budget(catalogue):
    jobs = [("train_chunk", chunk(run, k), {"runtime": 30}, 1) for run in (0, 1) for k in range(3)]
    jobs.append(("train_chunk", chunk(2, 0), {"runtime": 30, "gpu": 1, "gpu_model": "H100"}, 1))
    jobs.append(("prepare", {}, {}, 1))
    text = plan_report(catalogue, jobs)
    lines = text.splitlines()
    assert lines[0] == "htcannex plan (run x chunk -> site):"
    assert lines[1] == "rule train_chunk: round-robin over a, short, gpu"
    assert lines[2].split() == ["run", "\\", "chunk", "0", "1", "2"]
    assert lines[3].split() == ["0", "a", "gpu*", "gpu"]
    assert lines[4].split() == ["1", "gpu*", "gpu", "a"]
    assert lines[5].split() == ["2", "!", "-", "-"]
    assert "* run/chunk 0/1, 1/0: short skipped: rule train_chunk cannot run at site short" in text
    assert "! run/chunk 2/0: cannot run: no site of rule train_chunk's rotation can run this job" in text
    assert "prepare" not in text
    budget = text.split("htcannex budget", 1)[1].splitlines()
    rows = {line.split()[0]: line.split() for line in budget[2:-1]}
    # a: 2 jobs x 30 min in a 1 h annex of 2 cpus (two at once): one annex, 2 core-hours
    assert rows["a"] == ["a", "htcannex", "2", "30m", "1h", "1", "2", "0"]
    # gpu: 4 jobs x 30 min, one at a time (one GPU... cpus 4 / 1 = 4, no GPU asked): one annex, 4 core-hours
    assert rows["gpu"][:6] == ["gpu", "htcannex", "4", "30m", "1h", "1"] and rows["gpu"][6:] == ["4", "1"]
    assert "short" not in rows
    assert budget[-1].startswith("6 core-hours (1 GPU-hours) of annexes htcannex requests, core_hour_budget 5: "
                                 "OVER BUDGET")


def test_the_plan_is_the_same_whatever_order_snakemake_lists_the_jobs_in(catalogue):
    jobs = [("train_chunk", chunk(run, k), {"runtime": 30}, 1) for run in range(4) for k in range(3)]
    jobs += [("train_chunk", chunk(run, 3), {"runtime": 30, "gpu": 1, "gpu_model": "H100"}, 1) for run in range(4)]
    text = plan_report(catalogue, jobs)
    assert plan_report(catalogue, jobs[::-1]) == text
    assert "* run/chunk 0/1, 1/0, 2/2, 3/1: short skipped" in text
    # The same sites' reasons, whatever each job's rotation order: one line for all four.
    assert "! run/chunk 0/3, 1/3, 2/3, 3/3: cannot run" in text


def test_a_runtime_no_duration_category_allows_is_impossible_in_the_plan(catalogue):
    jobs = [("train_chunk", chunk(0, 0), {"runtime": "41h"}, 1), ("train_chunk", chunk(0, 1), {"runtime": 20}, 1)]
    text = plan_report(catalogue, jobs)
    assert text.splitlines()[3].split() == ["0", "!", "gpu*"]
    assert "! run/chunk 0/0: rule train_chunk: resources.runtime" in text and "JobDurationCategory Long" in text


def test_the_budget_counts_what_this_directory_already_spent(catalogue):
    jobs = [("train_chunk", chunk(0, 0), {"runtime": 30}, 1)]  # a: one annex, 2 core-hours of 5
    assert plan_report(catalogue, jobs).endswith("core_hour_budget 5")
    assert plan_report(catalogue, jobs, spent=4).endswith(
        "core_hour_budget 5 (4 spent already from this directory): OVER BUDGET. Annexes past the budget are not "
        "requested; their jobs wait idle_timeout and move to the next site of their rotation. Fix: raise "
        "annex.core_hour_budget, shorten lifetimes, or plan fewer chunks")


def test_the_plan_places_every_job_as_place_does_for_that_job_alone(tmp_path):
    """The plan judges each distinct request once per site (a sweep shares a few); every job must
    still get the decision placement.place gives it alone: across rules, policies, run ids, threads
    and resources, with skips, impossible jobs and a resource that is no valid request."""
    def edit(document):
        document["sites"] = {**SITES, "small": {"kind": "annex", "facts": "catalogue", "cpus": 1, "memory": "1GB",
                                                "max_lifetime": "2h", "lifetime": "1h"}}
        document["rotation"] = {"train_chunk": {"policy": "round-robin", "sites": ["a", "short", "small", "gpu"]},
                                "shuffled": {"policy": "shuffle", "sites": ["a", "short", "small", "gpu"]},
                                "pinned": {"policy": "pinned", "sites": ["short", "a"]}}
    catalogue = load_with(tmp_path, edit)
    shapes = [{"runtime": 5}, {"runtime": 30}, {"runtime": 30, "mem_mb": 1500}, {"mem_mb": 3000},
              {"gpu": 1, "runtime": 20}, {"gpu": 1, "gpu_model": "H100"}, {}, {"runtime": "41h"}]
    jobs = [(rule, chunk(run, k), shapes[(n + k) % len(shapes)], 1 + (k % 4 == 3))
            for n, (rule, run) in enumerate((rule, run) for rule in ("train_chunk", "shuffled", "pinned")
                                            for run in ("0", "3", "lr0.01-seed2"))
            for k in range(10)]
    planned = plan_jobs(catalogue, [*jobs, ("prepare", {}, {}, 1)])
    assert [(job.rule, job.run, job.chunk) for job in planned] == [(rule, wc["run"], int(wc["chunk"]))
                                                                   for rule, wc, _, _ in jobs]
    cells = set()
    for job, (rule, wildcards, resources, threads) in zip(planned, jobs):
        try:
            request = plan_request(rule, resources, threads)
        except SubmitValueError as error:
            assert job.decision is None and job.problem == str(error)
            continue
        assert job.decision == place(catalogue.rotation, catalogue.sites, rule, wildcards, 1, request)
        cells.add(job.cell[-1])
    assert {"*", "!"} <= cells and cells - {"*", "!"}  # skips, impossible jobs and plain placements all seen
