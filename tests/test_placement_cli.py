"""Placement that never strands a run, through the snakemake CLI on the embedded pool:
the plan (`snakemake -n`) shows each skip and each impossible job with its reason, the run honours
the skip, a job no site can run fails alone (no annex requested for it) while the others finish, a
`create: manual` site is waited for until the user brings it up, and the budget charges only the
annexes really requested."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from waiting import wait_until

from snakemake_executor_plugin_htcannex.ops.plan import HEADING as PLAN_HEADING

HERE = Path(__file__).parent
WORKFLOW = HERE / "workflows" / "placement"
BIN = Path(sys.executable).parent


@pytest.fixture
def workdir(tmp_path):
    work = tmp_path / "work"
    shutil.copytree(WORKFLOW, work)
    return work


def environment(tmp_path, spool) -> dict:
    return dict(os.environ, HTCANNEX_POOL_DIR=str(spool), PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
                XDG_CONFIG_HOME=str(tmp_path / "config"))


def snakemake_argv(workdir, *targets, extra=()):
    return ["snakemake", "--profile", str(workdir), *targets, *extra]


def snakemake(workdir, env, *targets, extra=(), timeout=180):
    return subprocess.run(snakemake_argv(workdir, *targets, extra=extra), cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=timeout)


def edit_catalogue(workdir, edit):
    path = workdir / "htcannex.yaml"
    document = yaml.safe_load(path.read_text())
    edit(document)
    path.write_text(yaml.safe_dump(document))


def ledger_sites(workdir) -> list:
    path = workdir / ".htcannex" / "annex-requests.json"
    return sorted(entry["site"] for entry in json.loads(path.read_text())) if path.exists() else []


def test_dry_run_marks_the_skip_and_the_impossible_jobs_with_their_reasons(tmp_path, workdir):
    result = snakemake(workdir, environment(tmp_path, tmp_path / "pool"), "-n")  # rule all: those four
    assert result.returncode == 0, result.stderr[-3000:]
    plan = result.stdout.split(PLAN_HEADING, 1)[1]
    # run 0 chunk 1 is short's turn (round-robin over a, short, b): b takes it, marked *
    assert "rule chunk: round-robin over a, short, b\nrun \\ chunk  0  1\n0            a  b*" in plan
    assert ("* run/chunk 0/1: short skipped: rule chunk cannot run at site short: its runtime 10m is longer "
            "than the annex lifetime at short (5m)") in plan
    assert "! run/chunk 0/0: cannot run: no site of rule long's rotation can run this job" in plan
    assert "rule long cannot run at site b: its runtime 45m is longer than the annex lifetime at b (30m)" in plan
    assert "rule gpu_chunk cannot run at site gpusite: it asks for GPU model 'H100' and gpusite has A10G" in plan
    budget = plan.split("htcannex budget", 1)[1]
    assert "short" not in budget and "gpusite" not in budget
    assert "1 core-hours (0 GPU-hours) of annexes htcannex requests, core_hour_budget 100" in budget
    assert not (workdir / ".htcannex").exists()  # nothing submitted, nothing requested


def test_annex_plan_command_prints_the_same_plan(tmp_path, workdir):
    env = environment(tmp_path, tmp_path / "pool")
    dry = snakemake(workdir, env, "-n")
    planned = subprocess.run([str(BIN / "htcannex"), "annex", "plan", "--htcannex-config", "htcannex.yaml"],
                             cwd=workdir, env=env, capture_output=True, text=True, timeout=120)
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert planned.stdout.strip() == (PLAN_HEADING + dry.stdout.split(PLAN_HEADING, 1)[1]).strip()
    assert "0            a  b*" in planned.stdout


def test_max_per_site_is_refused_with_the_fix(tmp_path, workdir):
    edit_catalogue(workdir, lambda document: document["annex"].update(max_per_site=2))
    result = snakemake(workdir, environment(tmp_path, tmp_path / "pool"), "-n")
    assert result.returncode != 0
    assert "htcannex.yaml: annex.max_per_site: is not a setting any more" in result.stderr
    assert "Fix: remove it" in result.stderr


MAX_PER_SITE_1 = "annex.max_per_site: 1 has no effect: there is at most one annex per site; remove the line"


def test_an_old_profiles_max_per_site_1_is_dropped_with_one_warning(tmp_path, workdir, embedded_pool):
    edit_catalogue(workdir, lambda document: document["annex"].update(max_per_site=1))
    env = environment(tmp_path, embedded_pool.spool_dir)
    for run in (["-n"], []):  # the plan (the logger plugin loads the file) and a run (the executor does)
        result = snakemake(workdir, env, "chunk-run0-0.txt", *run)
        assert result.returncode == 0, result.stderr[-3000:]
        [warning] = [line for line in result.stderr.splitlines() if "has no effect" in line]
        assert warning.startswith(f"{workdir / 'htcannex.yaml'}:") and warning.endswith(MAX_PER_SITE_1)
    assert (workdir / "chunk-run0-0.txt").read_text().startswith("on htcannex-a")


@pytest.mark.slow
def test_jobs_that_cannot_run_fail_alone_without_an_annex_and_the_skip_is_honoured(tmp_path, workdir,
                                                                                    embedded_pool):
    env = environment(tmp_path, embedded_pool.spool_dir)
    result = snakemake(workdir, env, "chunk-run0-0.txt", "chunk-run0-1.txt", "long-run0-0.txt",
                       "gpu-run0-0.txt", "refused.txt", extra=["--keep-going"])
    assert result.returncode != 0  # three jobs failed...
    # ...alone: the others ran, the skipped chunk on b (the plan's b*), not on short
    assert (workdir / "chunk-run0-0.txt").read_text() == "on htcannex-a\n"
    assert (workdir / "chunk-run0-1.txt").read_text() == "on htcannex-b\n"
    assert not (workdir / "long-run0-0.txt").exists() and not (workdir / "gpu-run0-0.txt").exists()
    assert "no site of rule long's rotation can run this job, so no annex is requested for it" in result.stderr
    assert "it asks for GPU model 'H100' and gpusite has A10G" in result.stderr
    assert "Fix the rule's resources or the sites" in result.stderr
    # A submit the schedd refuses fails that job with the schedd's message.
    assert "The schedd refused to queue job" in result.stderr
    assert "max_retries = many is invalid: expected an integer" in result.stderr
    assert not (workdir / "refused.txt").exists()
    # No annex for the impossible jobs or the skipped site, and only what was requested is charged;
    # the run ended the annexes it requested.
    assert ledger_sites(workdir) == ["a", "b"]
    assert not embedded_pool.annexes()
    assert not embedded_pool.schedd().query('HtcannexRule == "long" || HtcannexRule == "gpu_chunk"', ["ClusterId"])
    assert not embedded_pool.schedd().history('HtcannexRule == "long" || HtcannexRule == "gpu_chunk"', ["ClusterId"])


@pytest.mark.slow
def test_a_manual_site_is_waited_for_and_runs_once_brought_up_by_hand(tmp_path, workdir, embedded_pool):
    env = environment(tmp_path, embedded_pool.spool_dir)
    run = subprocess.Popen(snakemake_argv(workdir, "hand-run0-0.txt", extra=["--htcannex-idle-timeout", "5m"]),
                           cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: embedded_pool.schedd().query('HtcannexSite == "hand" && JobStatus == 5', ["ClusterId"]),
                   timeout_s=60, what="the job queued held for its manual annex")
        time.sleep(2)  # a few polls: htcannex must not have requested it
        assert not embedded_pool.annexes()
        # What htcannex told the user to run, run by hand mid-run:
        by_hand = ["htcannex", "annex", "create", "hand", "--htcannex-config", str(workdir / "htcannex.yaml"),
                   "--pool-dir", str(embedded_pool.spool_dir)]
        started = subprocess.run(by_hand, cwd=workdir, env=env, capture_output=True, text=True, timeout=60)
        assert started.returncode == 0, started.stderr
        _, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 0, stderr[-4000:]
    assert (workdir / "hand-run0-0.txt").read_text() == "on htcannex-hand\n"
    assert "site hand is created by hand (sites.hand.create: manual)" in stderr
    assert " ".join(by_hand) in stderr
    assert ledger_sites(workdir) == []  # never requested by htcannex, never charged


@pytest.mark.slow
def test_a_manual_site_nobody_brings_up_times_out_and_its_job_moves_on(tmp_path, workdir, embedded_pool):
    result = snakemake(workdir, environment(tmp_path, embedded_pool.spool_dir), "hop-run0-0.txt")
    assert result.returncode == 0, result.stderr[-4000:]
    # The same timeout (idle_timeout: 3s) and reroute as an annex that never comes up.
    assert "annex htcannex-hand did not come up" in result.stderr and "Moved it to site a" in result.stderr
    assert (workdir / "hop-run0-0.txt").read_text() == "on htcannex-a\n"
    assert ledger_sites(workdir) == ["a"]


@pytest.mark.slow
def test_the_budget_refuses_the_annex_past_it_and_its_job_moves_to_one_already_paid_for(tmp_path, workdir,
                                                                                        embedded_pool):
    # One 1-cpu annex for 30 min is 0.5 core-hours: the budget pays for a's, not for b's as well.
    edit_catalogue(workdir, lambda document: document["annex"].update(core_hour_budget=0.5))
    env = environment(tmp_path, embedded_pool.spool_dir)
    targets = ("chunk-run0-0.txt", "chunk-run1-0.txt")  # run 0 -> a; run 1 -> short, skipped -> b
    dry = snakemake(workdir, env, "-n", *targets)
    assert "1 core-hours (0 GPU-hours) of annexes htcannex requests, core_hour_budget 0.5: OVER BUDGET" in dry.stdout
    result = snakemake(workdir, env, *targets)
    assert result.returncode == 0, result.stderr[-4000:]
    # Whichever job Snakemake submits first gets its annex; the other's is past the budget, so that
    # job waits idle_timeout and moves along its rotation to the annex already paid for.
    [paid] = ledger_sites(workdir)
    refused = ({"a", "b"} - {paid}).pop()
    assert (f"not requesting annex htcannex-{refused}: 0.5 more core-hours would exceed core_hour_budget=0.5"
            in result.stderr)
    assert f"Moved it to site {paid}" in result.stderr
    assert {(workdir / target).read_text() for target in targets} == {f"on htcannex-{paid}\n"}
    assert not embedded_pool.annexes()  # the run ended the one annex it requested
    # The next plan counts what this directory already spent.
    again = snakemake(workdir, env, "-n", "--forceall", "chunk-run0-0.txt")
    assert "core_hour_budget 0.5 (0.5 spent already from this directory): OVER BUDGET" in again.stdout
