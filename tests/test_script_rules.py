"""Python `script:` rules run their script in the job without a Snakemake process, with the
`snakemake` object as Snakemake gives it; rules that need Snakemake in the job still get it.

Through the snakemake CLI, on the embedded pool with the local profile and with Snakemake's
local executor; the scripts record the processes they ran under (tests/workflows/script_rules).
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parent
BIN = Path(sys.executable).parent
OUTPUTS = ["results/report-alpha.json", "results/copies/alpha.txt", "logs/report-alpha.log"]


def copy_workflow(where: Path) -> Path:
    shutil.copytree(HERE / "workflows" / "script_rules", where)
    return where


def snakemake(workdir: Path, *args: str, umask: int = 0o022) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["snakemake", *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=240,
                          umask=umask)


def on_pool(workdir: Path, pool, *targets: str, umask: int = 0o022) -> subprocess.CompletedProcess:
    return snakemake(workdir, "--profile", str(REPO / "profiles" / "local"),
                     "--htcannex-pool-dir", str(pool.spool_dir), "--retries", "0", "--verbose", *targets, umask=umask)


def ran_snakemake(lineage: Path) -> bool:
    """Whether a Snakemake process was among the job's processes above the script."""
    return any(argv[1:3] == ["-m", "snakemake"] for argv in json.loads(lineage.read_text())["ancestors"])


def test_a_script_rule_gives_what_the_local_executor_gives(tmp_path, embedded_pool):
    pooled, local = copy_workflow(tmp_path / "pooled"), copy_workflow(tmp_path / "local")
    result = on_pool(pooled, embedded_pool)
    assert result.returncode == 0, result.stderr[-4000:]
    # The same profile (its config too), Snakemake's local executor.
    result = snakemake(local, "--profile", str(REPO / "profiles" / "local"), "--executor", "local", "--cores", "2")
    assert result.returncode == 0, result.stderr[-4000:]

    for output in OUTPUTS:
        assert (pooled / output).read_text() == (local / output).read_text(), output
    report = json.loads((pooled / OUTPUTS[0]).read_text())
    assert report["params"]["greeting"] == "hello 'quoted' \"world\" $HOME"
    assert report["params"]["derived"] == "alpha:data/alpha.txt"
    assert report["threads"] == 2 and report["resources"] == {"mem_mb": 300, "flavour": "vanilla"}
    assert report["config"]["experiment"]["seeds"] == [1, 2]
    assert report["next_to_script"] == "greetings from the script's directory\n"
    assert report["file"] == "report.py"
    # The script's job ran without Snakemake: the debug log says why the others did not.
    assert "(rule report) runs Snakemake" not in result.stderr
    ads = {ad["HtcannexRule"]: ad for ad in embedded_pool.schedd().history("true", ["HtcannexRule", "Arguments"])}
    assert "-m snakemake" not in ads["report"]["Arguments"]
    # The prepared script is removed once its job is done, as Snakemake removes its own.
    assert not list((pooled / ".htcannex" / "scripts").iterdir())


def test_no_snakemake_in_a_python_script_job_and_snakemake_where_needed(tmp_path, embedded_pool):
    workdir = copy_workflow(tmp_path / "work")
    result = on_pool(workdir, embedded_pool, "results/lineage.json", "results/lineage-tmpdir.json",
                     "results/bash-alpha.txt")
    assert result.returncode == 0, result.stderr[-4000:]

    assert not ran_snakemake(workdir / "results" / "lineage.json")
    # A script using the tmpdir resource runs under Snakemake in its job, where tmpdir is the sandbox's.
    assert ran_snakemake(workdir / "results" / "lineage-tmpdir.json")
    assert json.loads((workdir / "results" / "lineage-tmpdir.json").read_text())["tmpdir_in_sandbox"]
    assert "its script uses the tmpdir resource" in result.stderr
    # A bash script: Snakemake's bash preamble, in the job.
    assert (workdir / "results" / "bash-alpha.txt").read_text() == "bash 1\n"
    assert "its script is bash" in result.stderr


def test_the_prepared_script_is_created_as_snakemake_creates_files(tmp_path, embedded_pool):
    """The job's owner may not be the submitter (root's jobs run as another user on a real pool) and
    HTCondor reads input files as the owner: the prepared script follows the umask, as every file
    Snakemake writes does, not a private 0600."""
    pooled = copy_workflow(tmp_path / "pooled")
    result = on_pool(pooled, embedded_pool, "--skip-script-cleanup", "results/report-alpha.json", umask=0o002)
    assert result.returncode == 0, result.stderr[-4000:]
    (prepared,) = (pooled / ".htcannex" / "scripts").iterdir()
    assert prepared.stat().st_mode & 0o777 == 0o664
