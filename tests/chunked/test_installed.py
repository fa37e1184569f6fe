"""htcannex as `pip install` leaves it: a wheel built from this checkout, installed (not editable) into
a fresh virtual environment, used from a directory outside the checkout."""
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, WORKFLOW, pool_env, run, toy_config

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin/ of a fresh venv holding the wheel; its dependencies are this environment's (a path
    entry, so none of this checkout's editable install comes with them)."""
    base = tmp_path_factory.mktemp("installed")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(base / "wheel"), str(REPO)],
                   check=True, capture_output=True)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    packages = next(venv.glob("lib/python*/site-packages"))
    (packages / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    wheel = next((base / "wheel").glob("*.whl"))
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True)
    return venv / "bin"


def user_env(pool, home: Path) -> dict:
    return pool_env(pool) | {"XDG_CONFIG_HOME": str(home / "config")}


@pytest.mark.slow
def test_an_installed_wheel_plans_and_runs_an_experiment_and_the_module_outside_the_checkout(
        installed, tmp_path, embedded_pool):
    env = user_env(embedded_pool, tmp_path)
    python = str(installed / "python")
    where = run([python, "-c", "import snakemake_executor_plugin_htcannex.bundled as b; print(b.snakefile('chunked_training'))"],
                tmp_path, env)
    assert where.stdout.startswith(str(installed.parent)), where.stdout + where.stderr  # the wheel's, not the checkout's
    assert run([str(installed / "htcannex"), "profiles", "install"], tmp_path, env).returncode == 0

    experiment = tmp_path / "experiment"
    shutil.copytree(HERE / "vars_experiment", experiment)
    planned = run([str(installed / "htcannex"), "experiment", "plan", "Experiment.yaml", "--profile", "local"],
                  experiment, env)
    assert planned.returncode == 0 and "vars.sh 1" in planned.stdout, planned.stdout + planned.stderr
    ran = run([str(installed / "htcannex"), "experiment", "run", "Experiment.yaml", "--profile", "local"], experiment, env)
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-4000:]
    assert len(list((experiment / "seen").iterdir())) == 4  # 2 runs x 2 chunks

    # chunked_training as a module of the user's own workflow, found in the installed package.
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(WORKFLOW / "scripts" / "toy_train.sh", project / "train.sh")
    (project / "config.yaml").write_text(yaml.safe_dump(toy_config()))
    (project / "Snakefile").write_text(
        "from snakemake_executor_plugin_htcannex.bundled import snakefile\n\n"
        'configfile: "config.yaml"\n\n'
        "module chunked_training:\n"
        '    snakefile: snakefile("chunked_training")\n'
        "    config: config\n\n"
        "use rule * from chunked_training\n")
    module = run([python, "-m", "snakemake", "--executor", "htcannex", "--profile", "local"], project, env)
    assert module.returncode == 0, (module.stdout + module.stderr)[-4000:]
    summary = (project / "results" / "toy" / "compare" / "summary.tsv").read_text().splitlines()
    assert len(summary) == 1 + 3  # a header and the toy config's 3 runs
