"""Plain shell rules run their command in the job without a Snakemake process there
(direct_command.py).

Through the snakemake CLI with the local profile: the queue's ads show which jobs ran
Snakemake (its `--target-jobs` in Arguments, the Snakefile among the transferred
inputs) and the outputs show the commands ran as Snakemake would run them.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parent
BIN = Path(sys.executable).parent


@pytest.fixture
def workdir(tmp_path):
    shutil.copytree(HERE / "workflows" / "direct", tmp_path / "work")
    return tmp_path / "work"


def snakemake(workdir, pool, *extra):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["snakemake", "--executor", "htcannex", "--profile", str(REPO / "profiles" / "local"),
         "--htcannex-pool-dir", str(pool.spool_dir), "--retries", "0", *extra],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=240,
    )


def ads_by_rule(pool) -> dict:
    return {ad["HtcannexRule"]: ad for ad in pool.schedd().history(
        "true", ["HtcannexRule", "Cmd", "Arguments", "TransferInput", "RequestMemory", "ExitCode", "WantContainer",
                 "ContainerImage"])}


def runs_snakemake(ad) -> bool:
    return "--target-jobs" in ad["Arguments"]


def test_plain_shell_rules_run_without_snakemake_and_others_with_it(workdir, embedded_pool):
    result = snakemake(workdir, embedded_pool)
    assert result.returncode == 0, result.stderr[-4000:]

    # Snakemake's own formatting: quoting, wildcards, threads; the output directory made.
    assert (workdir / "plain" / "a.txt").read_text() == "hello 'quoted' \"world\" $HOME a 2\n"
    assert (workdir / "multiline.txt").read_text() == "first\nsecond\n"
    assert (workdir / "python.txt").read_text() == "from a run block\n"

    ads = ads_by_rule(embedded_pool)
    plain = ads["plain"]
    assert plain["Cmd"] == "/bin/bash" and not runs_snakemake(plain)
    assert "Snakefile" not in plain.get("TransferInput", "")
    # Its output's directory came by input transfer (an empty tree), not from a mkdir process in the job.
    assert "mkdir" not in plain["Arguments"]
    assert plain["TransferInput"].endswith("/"), plain["TransferInput"]
    assert (Path(plain["TransferInput"]) / "plain").is_dir()
    # A multi-line command cannot be a submit argument; a run block needs Snakemake.
    for rule in ("multiline", "python"):
        assert runs_snakemake(ads[rule]), rule
        assert "Snakefile" in ads[rule]["TransferInput"], rule
    # A command using the tmpdir resource runs under Snakemake in its job, where tmpdir is the sandbox's.
    assert runs_snakemake(ads["tmpdir"])
    tmpdir, sandbox = (workdir / "tmpdir.txt").read_text().split()
    assert tmpdir.startswith(sandbox), (tmpdir, sandbox)
    # Only jobs running Snakemake get room for it on top of the rule's memory.
    assert plain["RequestMemory"] < ads["python"]["RequestMemory"]


@pytest.mark.slow
def test_a_failing_pipe_fails_the_job_as_under_snakemake(workdir, embedded_pool):
    result = snakemake(workdir, embedded_pool, "broken.txt")
    assert result.returncode != 0
    assert "exited with return value 1" in result.stderr
    assert not (workdir / "broken.txt").exists()


@pytest.mark.slow
def test_snakemake_in_every_job_when_asked(workdir, embedded_pool):
    result = snakemake(workdir, embedded_pool, "plain/b.txt", "--htcannex-snakemake-in-every-job")
    assert result.returncode == 0, result.stderr[-4000:]
    assert (workdir / "plain" / "b.txt").read_text() == "hello 'quoted' \"world\" $HOME b 2\n"
    assert runs_snakemake(ads_by_rule(embedded_pool)["plain"])


def test_on_a_shared_filesystem_the_output_directory_is_made_before_the_submit(workdir, embedded_pool):
    result = snakemake(workdir, embedded_pool, "plain/c.txt", "--htcannex-shared-fs")
    assert result.returncode == 0, result.stderr[-4000:]
    assert (workdir / "plain" / "c.txt").read_text() == "hello 'quoted' \"world\" $HOME c 2\n"
    plain = ads_by_rule(embedded_pool)["plain"]
    assert not runs_snakemake(plain) and "mkdir" not in plain["Arguments"]


def test_a_rule_s_container_is_htcondor_s_container_universe_when_snakemake_would_use_it(workdir, embedded_pool):
    """Under --software-deployment-method apptainer the job asks HTCondor for the rule's image. The embedded pool,
    like an execute point without Apptainer, advertises no runtime: the job fails at once, naming what is
    missing, instead of running outside its image (the local executor fails here too, without Apptainer)."""
    result = snakemake(workdir, embedded_pool, "container.txt", "--software-deployment-method", "apptainer")
    assert result.returncode != 0
    assert not (workdir / "container.txt").exists()
    assert "no slot can run it" in result.stderr, result.stderr[-4000:]
    assert "FAILS (job Requirements) TARGET.HasContainer" in result.stderr
    ad = ads_by_rule(embedded_pool)["in_container"]
    assert not runs_snakemake(ad)  # the container needs no Snakemake in the job
    assert ad["WantContainer"] is True and ad["ContainerImage"] == "docker://alpine:3.20"


def test_without_the_apptainer_method_a_rule_s_container_is_ignored_as_snakemake_ignores_it(workdir, embedded_pool):
    result = snakemake(workdir, embedded_pool, "container.txt")
    assert result.returncode == 0, result.stderr[-4000:]
    assert (workdir / "container.txt").read_text() == "in a container\n"
    ad = ads_by_rule(embedded_pool)["in_container"]
    assert not ad.get("WantContainer", False) and "ContainerImage" not in ad


def test_a_rule_that_keeps_its_snakemake_keeps_its_container_to_that_snakemake(workdir, embedded_pool):
    # A run: block's Snakemake in the job runs Apptainer itself (here none is installed: the job fails, as it
    # would on an execute point without Apptainer on its PATH); HTCondor is not asked for a container.
    snakemake(workdir, embedded_pool, "container-run.txt", "--software-deployment-method", "apptainer")
    ad = ads_by_rule(embedded_pool)["run_in_container"]
    assert runs_snakemake(ad) and not ad.get("WantContainer", False) and "ContainerImage" not in ad


def test_a_rule_s_conda_environment_keeps_a_snakemake_in_the_job_only_under_the_conda_method(workdir, embedded_pool):
    result = snakemake(workdir, embedded_pool, "conda.txt")
    assert result.returncode == 0, result.stderr[-4000:]
    assert not runs_snakemake(ads_by_rule(embedded_pool)["in_conda"])  # ignored, as Snakemake ignores it
    (workdir / "conda.txt").unlink()
    # Under the method the job's Snakemake makes the environment (here no conda: that job fails, as on an execute
    # point without conda).
    snakemake(workdir, embedded_pool, "conda.txt", "--software-deployment-method", "conda")
    assert sum(runs_snakemake(ad) for ad in embedded_pool.schedd().history(
        'HtcannexRule == "in_conda"', ["Arguments"])) == 1
