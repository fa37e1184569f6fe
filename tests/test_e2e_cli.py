"""End to end through the snakemake CLI with the local profile, as the docs say to run it:

    htcannex profiles install
    snakemake --executor htcannex --profile local

A chain of chunk jobs must land on the sites the rotation policy names (read
back from the event log's AnnexName), on annexes created on demand (each job
submitted held, released when its annex is up), with correct outputs.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import htcondor2
import pytest

from htcannex_pool import faults
from snakemake_executor_plugin_htcannex.sites.catalogue import load_catalogue
from snakemake_executor_plugin_htcannex.track.event_log import NEVER_WAIT

HERE = Path(__file__).parent
REPO = HERE.parent
CHUNKS_WORKFLOW = HERE / "workflows" / "chunks"
BIN = Path(sys.executable).parent


@pytest.fixture
def user_env(tmp_path, embedded_pool):
    """A user with an empty config dir whose embedded pool lives in a test spool."""
    env = dict(os.environ)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["HTCANNEX_POOL_DIR"] = str(embedded_pool.spool_dir)
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    return env


def run(argv, cwd, env, timeout=240):
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_profiles_install_refuses_to_overwrite_an_edited_profile(tmp_path, user_env):
    assert run(["htcannex", "profiles", "install"], tmp_path, user_env).returncode == 0
    edited = tmp_path / "config" / "snakemake" / "nairr" / "htcannex.yaml"
    edited.write_text(edited.read_text() + "# my allocation\n")
    again = run(["htcannex", "profiles", "install"], tmp_path, user_env)
    assert again.returncode == 1 and "--force" in again.stdout
    assert edited.read_text().endswith("# my allocation\n")
    forced = run(["htcannex", "profiles", "install", "--force", "nairr"], tmp_path, user_env)
    assert forced.returncode == 0
    assert not edited.read_text().endswith("# my allocation\n")


def test_annex_plan_prints_where_each_chunk_goes(tmp_path, user_env):
    assert run(["htcannex", "profiles", "install"], tmp_path, user_env).returncode == 0
    shutil.copytree(CHUNKS_WORKFLOW, tmp_path / "work")
    result = run(["htcannex", "annex", "plan", "--profile", "local"], tmp_path / "work", user_env)
    assert result.returncode == 0, result.stderr
    catalogue = load_catalogue(REPO / "profiles" / "local" / "htcannex.yaml")
    table = result.stdout.split("\n\n")[0].splitlines()[3:]  # after the heading, the rule and the header row
    rows = {line.split()[0]: line.split()[1:] for line in table}
    for run_id in ("0", "1"):
        assert rows[run_id] == [
            catalogue.rotation.place("train_chunk", {"run": run_id, "chunk": str(chunk)}).site
            for chunk in range(3)
        ]
    assert not (tmp_path / "work" / "results").exists()  # nothing ran


@pytest.mark.slow
def test_profiles_install_then_chunks_rotate_over_annexes(tmp_path, user_env, embedded_pool):
    installed = run(["htcannex", "profiles", "install"], tmp_path, user_env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    workdir = tmp_path / "work"
    shutil.copytree(CHUNKS_WORKFLOW, workdir)

    result = run(["snakemake", "--executor", "htcannex", "--profile", "local"], workdir, user_env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]

    for run_id in ("0", "1"):
        history = (workdir / f"results/run{run_id}/chunk2.txt").read_text().splitlines()
        assert history == [f"run {run_id} chunk {chunk}" for chunk in range(3)]

    annex_of_job, released = _read_event_log(workdir / ".htcannex" / "jobs.log")
    catalogue = load_catalogue(REPO / "profiles" / "local" / "htcannex.yaml")
    placed = 0
    for ad in embedded_pool.schedd().history('HtcannexRule == "train_chunk"',
                                             ["ClusterId", "ProcId", "HtcannexWildcards"]):
        wildcards = json.loads(ad["HtcannexWildcards"])
        run_id, chunk = wildcards["run"], wildcards["chunk"]
        expected = catalogue.rotation.place("train_chunk", {"run": run_id, "chunk": chunk}).site
        job_id = f"{ad['ClusterId']}.{ad['ProcId']}"
        assert annex_of_job[job_id] == catalogue.sites[expected].annex_name, (run_id, chunk)
        placed += 1
    assert placed == 6
    # Every annex was created on demand: its first job waited on hold and was released.
    assert len(released) >= len(set(annex_of_job.values()))


def _read_event_log(path: Path):
    annex_of_job, released = {}, set()
    for event in htcondor2.JobEventLog(str(path)).events(stop_after=NEVER_WAIT):
        job_id = f"{event.cluster}.{event.proc}"
        if event.type == htcondor2.JobEventType.EXECUTE:
            annex_of_job[job_id] = event["ExecuteProps"]["AnnexName"]
        elif event.type == htcondor2.JobEventType.JOB_RELEASED:
            assert job_id not in annex_of_job, f"job {job_id} released after it ran"
            released.add(job_id)
    return annex_of_job, released


@pytest.mark.slow
def test_failures_are_reported_with_reason_and_fix_and_leave_no_jobs(tmp_path, user_env, embedded_pool):
    workdir = tmp_path / "work"
    shutil.copytree(HERE / "workflows" / "failures", workdir)
    result = run(
        ["snakemake", "--executor", "htcannex", "--profile", str(REPO / "profiles" / "local"),
         "--htcannex-config", "htcannex.yaml", "--keep-going", "--retries", "0"],
        workdir, user_env,
    )
    assert result.returncode != 0
    errors = result.stderr
    # a failed command: its job terminates with the command's exit code (when_to_transfer_output =
    # ON_SUCCESS: no output transfer to hold it), reported with the tail of its stderr
    assert "exited with return value 3" in errors and "loss is nan at epoch 3" in errors
    assert "releasing HTCondor job" not in errors
    # a memory hold: removed, with the reason and the fix
    assert "HoldReasonCode 34" in errors and "mem_mb=lambda wildcards, attempt" in errors
    # nobody created the annex (mode off): the command to run, then the timeout
    assert "htcannex annex create faraway --htcannex-config" in errors
    assert "annex htcannex-faraway did not come up" in errors
    # nothing is left behind in the queue, held or idle
    assert embedded_pool.schedd().query("JobStatus != 4 && JobStatus != 3", ["ClusterId"]) == []


@pytest.mark.slow
def test_transient_transfer_hold_is_released_and_the_job_succeeds(tmp_path, user_env, embedded_pool):
    workdir = tmp_path / "work"
    shutil.copytree(CHUNKS_WORKFLOW, workdir)
    embedded_pool.ensure_running()
    faults.fail_next_transfer(embedded_pool)  # the first job's input transfer fails (code 13)
    result = run(
        ["snakemake", "--executor", "htcannex", "--profile", str(REPO / "profiles" / "local"),
         "--config", 'runs=["0"]', "chunks=1"],
        workdir, user_env,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "after a transient hold, release 1 of 2" in result.stderr
    assert (workdir / "results/run0/chunk0.txt").read_text() == "run 0 chunk 0\n"


def test_missing_profile_file_says_how_to_name_it(tmp_path, user_env):
    shutil.copytree(CHUNKS_WORKFLOW, tmp_path / "work")
    result = run(["snakemake", "--executor", "htcannex", "--jobs", "1"], tmp_path / "work", user_env)
    assert result.returncode != 0
    assert "--htcannex-config" in result.stderr and "htcannex profiles install" in result.stderr


def test_bad_htcannex_yaml_names_file_key_and_fix(tmp_path, user_env):
    workdir = tmp_path / "work"
    shutil.copytree(CHUNKS_WORKFLOW, workdir)
    (workdir / "htcannex.yaml").write_text("pool: local\nannex: {mode: sometimes}\nsites: {here: {kind: pool}}\n")
    result = run(["snakemake", "--executor", "htcannex", "--jobs", "1", "--htcannex-config", "htcannex.yaml"],
                 workdir, user_env)
    assert result.returncode != 0
    assert "htcannex.yaml: annex.mode" in result.stderr and "off, ask, auto" in result.stderr
    assert not (workdir / ".htcannex" / "jobs.log").exists()  # nothing was submitted
