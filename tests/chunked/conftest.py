"""Running the chunked_training workflow through the snakemake CLI, as a user would."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import htcondor2
import pytest
import yaml
from snakemake_executor_plugin_htcannex.track.event_log import NEVER_WAIT

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows" / "chunked_training"
PROFILE = REPO / "profiles" / "local"
BIN = Path(sys.executable).parent


def toy_config(**overrides) -> dict:
    """The workflow's own config with the toy trainer as a user's script (train.sh in the workdir)."""
    config = yaml.safe_load((WORKFLOW / "config" / "config.yaml").read_text())
    config["training"]["command"] = config["training"]["command"].replace(
        "{workflow_dir}/scripts/toy_train.sh", "train.sh")
    config["training"]["files"] = ["train.sh"]
    config["evaluate"] = {"command": "", "files": [], "resources": {}}
    return config | overrides


@pytest.fixture
def user_project(tmp_path):
    """A user's own repository next to a copy of the workflow: project/ uses ../workflows/chunked_training."""
    shutil.copytree(WORKFLOW, tmp_path / "workflows" / "chunked_training",
                    ignore=shutil.ignore_patterns("__pycache__", "results", ".snakemake"))
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(WORKFLOW / "scripts" / "toy_train.sh", project / "train.sh")
    (project / "Snakefile").write_text(
        'configfile: "config.yaml"\n\n'
        "module chunked_training:\n"
        '    snakefile: "../workflows/chunked_training/Snakefile"\n'
        "    config: config\n\n"
        "use rule * from chunked_training\n"
    )
    return project


def pool_env(pool) -> dict:
    return dict(os.environ, HTCANNEX_POOL_DIR=str(pool.spool_dir), PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")


def run(argv, cwd, env, timeout=300):
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def annexes_by_job(workdir: Path) -> dict:
    """HTCondor job id -> the annex it ran on, None for an ordinary slot (from the run's event log)."""
    log = htcondor2.JobEventLog(str(workdir / ".htcannex" / "jobs.log"))
    return {f"{e.cluster}.{e.proc}": e["ExecuteProps"].get("AnnexName")
            for e in log.events(stop_after=NEVER_WAIT) if e.type == htcondor2.JobEventType.EXECUTE}
