"""MLDAG experiments run end to end on the embedded pool through `htcannex experiment run`."""
import csv
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from .conftest import BIN, PROFILE, annexes_by_job, pool_env, run

HERE = Path(__file__).parent


def experiment_copy(name: str, directory: Path) -> Path:
    shutil.copytree(HERE / name, directory, dirs_exist_ok=True)
    return directory


def experiment_run(directory: Path, pool, *options: str):
    return run([str(BIN / "htcannex"), "experiment", "run", "Experiment.yaml", "--profile", str(PROFILE), *options],
               directory, pool_env(pool))


def chunk_sites(pool, workdir: Path) -> dict[str, list[str]]:
    """run uuid -> the annex each of its chunks ran on, in chunk order."""
    annex_of = annexes_by_job(workdir)
    chunks: dict[str, dict[int, str]] = {}
    for ad in pool.schedd().history('HtcannexRule == "train_chunk"', ["ClusterId", "ProcId", "HtcannexWildcards"]):
        wildcards = json.loads(ad["HtcannexWildcards"])
        chunks.setdefault(wildcards["run"], {})[int(wildcards["chunk"])] = annex_of[f"{ad['ClusterId']}.{ad['ProcId']}"]
    return {run_uuid: [by_chunk[c] for c in sorted(by_chunk)] for run_uuid, by_chunk in chunks.items()}


def table(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def runs_table(workdir: Path, slug: str) -> dict[str, dict]:
    return {row["run_uuid"]: row for row in table(workdir / "results" / slug / "runs.tsv")}


@pytest.mark.slow
def test_the_talks_global_pretraining_runs_unchanged_on_the_local_profile(tmp_path, embedded_pool):
    workdir = experiment_copy("global_pretraining", tmp_path)
    if not Path("/bin/python").exists():  # the slide's interpreter; this machine's Python where there is none
        text = (workdir / "Experiment.yaml").read_text()
        (workdir / "Experiment.yaml").write_text(text.replace("/bin/python", sys.executable))
    assert not (workdir / "resources.yaml").exists()
    result = experiment_run(workdir, embedded_pool)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]

    runs = runs_table(workdir, "global_pretraining")
    assert sorted(int(row["alpha"]) for row in runs.values()) == list(range(10))  # range(0, 10): 10 runs
    sites = chunk_sites(embedded_pool, workdir)
    for run_uuid, row in runs.items():
        history = (workdir / "output" / "training_logs" / run_uuid / "history").read_text().splitlines()
        # 30 epochs, each once and in order, in 6 chunks of 5 that hop: every chunk on another annex than the one before.
        assert [int(line.split()[1]) for line in history] == list(range(1, 31))
        assert all(f"alpha {row['alpha']} seed {row['random_seed']} " in line for line in history)
        annexes = sites[run_uuid]
        assert len(annexes) == 6 and all(a != b for a, b in zip(annexes, annexes[1:])), annexes
        # $(ResourceName) in the environment is the site each chunk ran at.
        for chunk, annex in enumerate(annexes):
            assert {line.split(" site ")[1].split()[0] for line in history[5 * chunk:5 * chunk + 5]} == \
                {annex.removeprefix("htcannex-")}


@pytest.mark.slow
def test_every_mldag_var_reaches_the_jobs_arguments_and_environment(tmp_path, embedded_pool):
    workdir = experiment_copy("vars_experiment", tmp_path)
    result = experiment_run(workdir, embedded_pool)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    runs = runs_table(workdir, "vars")
    sites = chunk_sites(embedded_pool, workdir)
    assert sorted(row["alpha"] for row in runs.values()) == ["0.5", "adam"]
    for run_uuid, row in runs.items():
        for chunk, annex in enumerate(sites[run_uuid], start=1):
            # epoch run_uuid random_seed ResourceName run_number continue_from_checkpoint alpha epochs epochs_per_job
            expected = [str(chunk), run_uuid, row["random_seed"], annex.removeprefix("htcannex-"), "0",
                        "none" if chunk == 1 else "true", row["alpha"], "2", "1"]
            seen = (workdir / "seen" / f"{run_uuid}-{chunk}").read_text().splitlines()
            assert seen == ["args " + " ".join(expected), "env " + " ".join(expected)]


@pytest.mark.slow
def test_a_failed_chunk_shows_what_its_command_said_and_why_explains_it_from_history(tmp_path, embedded_pool):
    # The command exits 1 in chunk 2 before writing its output: HTCondor holds the job for the missing
    # output (12/2), and what the command wrote to stderr still comes back.
    workdir = experiment_copy("experiment", tmp_path)
    script = workdir / "pretrain.sh"
    script.write_text(script.read_text().replace("set -euo pipefail\n", (
        'set -euo pipefail\nif [ "$1" = 2 ]; then echo "ValueError: loss is nan at epoch 2" >&2; exit 1; fi\n')))
    experiment = workdir / "Experiment.yaml"
    experiment.write_text(experiment.read_text().replace("stop: 3", "stop: 1"))
    result = experiment_run(workdir, embedded_pool, "--retries", "0")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    message = output.split("Error in rule train_chunk:")[1].split("jobid:")[0]
    assert "HoldReasonCode 12, HoldReasonSubCode 2" in message and "no stderr back" not in message
    log = message.split("Last lines of ")[1].split(":\n")[0]
    assert message.split("Last lines of ")[1].split(":\n")[1].startswith("ValueError: loss is nan at epoch 2")
    assert (workdir / log).read_text() == "ValueError: loss is nan at epoch 2\n"  # on disk where it says
    job_id = message.split("HTCondor job ")[1].split()[0]
    why = run([str(BIN / "htcannex"), "why", job_id], workdir, pool_env(embedded_pool))
    assert why.returncode == 0, why.stderr
    assert f"htcannex why {job_id}" not in why.stdout  # it explains, instead of pointing at itself
    assert why.stdout.rstrip().endswith(f"its command's last lines ({log}):\nValueError: loss is nan at epoch 2")


@pytest.mark.slow
def test_a_rerun_with_nothing_to_do_ends_quietly(tmp_path, embedded_pool):
    workdir = experiment_copy("vars_experiment", tmp_path)
    assert experiment_run(workdir, embedded_pool).returncode == 0
    # Snakemake returns from a run with nothing to do without shutting its executor down; the status
    # thread then met the interpreter's exit mid-poll about one run in three.
    for _ in range(6):
        rerun = experiment_run(workdir, embedded_pool)
        output = rerun.stdout + rerun.stderr
        assert rerun.returncode == 0 and "Nothing to be done" in output, output[-3000:]
        assert "cannot schedule new futures" not in output and "Traceback" not in output, output[-3000:]


@pytest.mark.slow
def test_a_study_gives_each_run_an_unbroken_pinned_twin_compared_on_the_users_metric(tmp_path, embedded_pool):
    workdir = experiment_copy("study_experiment", tmp_path)
    result = experiment_run(workdir, embedded_pool)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    runs = runs_table(workdir, "study")
    annex_of = annexes_by_job(workdir)
    twins = {}
    for ad in embedded_pool.schedd().history('HtcannexRule == "train_baseline"',
                                             ["ClusterId", "ProcId", "HtcannexWildcards"]):
        twins[json.loads(ad["HtcannexWildcards"])["run"]] = annex_of[f"{ad['ClusterId']}.{ad['ProcId']}"]
    assert sorted(twins) == sorted(runs) and set(twins.values()) == {"htcannex-expanse"}  # one job per run, pinned
    for run_uuid, row in runs.items():
        twin_files = [path for path in (workdir / "output").iterdir() if path.name not in runs]
        histories = {path.name: path.joinpath("history").read_text().splitlines() for path in twin_files}
        # The twin: its own run_uuid, the run's seed and vars, epochs 1-4 in one job on the pinned site.
        expected = [f"epoch {e} seed {row['random_seed']} alpha {row['alpha']} site expanse" for e in range(1, 5)]
        assert expected in histories.values()
    # The run and its twin side by side, then the paired study per seed group (the run_numbers of an alpha).
    summary = table(workdir / "results" / "study" / "compare" / "summary.tsv")
    assert list(summary[0]) == ["run", "alpha", "run_number", "loss:distributed", "loss:baseline", "loss:delta", "verdict"]
    assert sorted((row["alpha"], row["loss:distributed"], row["loss:baseline"], row["verdict"]) for row in summary) == \
        [("1", "0.25", "0.25", "identical (bitwise)")] * 2 + [("3", "0.75", "0.75", "identical (bitwise)")] * 2
    study = table(workdir / "results" / "study" / "compare" / "equivalence.tsv")
    assert [(row["group"], row["pairs"], row["verdict"]) for row in study] == \
        [("alpha=1", "2", "identical (every delta 0)"), ("alpha=3", "2", "identical (every delta 0)")]
    provenance = table(workdir / "results" / "study" / "compare" / "provenance.tsv")
    assert len(provenance) == 8 and all(
        hashlib.sha256((workdir / row["file"]).read_bytes()).hexdigest() == row["sha256"] for row in provenance)
    assert (workdir / "results" / "study" / "compare" / "equivalence.png").read_bytes().startswith(b"\x89PNG")
    check = (workdir / "results" / "study" / "compare" / "check.txt").read_text()
    assert check.endswith("all checks passed\n") and "equivalence study" in check


@pytest.mark.slow
def test_a_twin_in_chunks_trains_the_runs_chunks_every_one_on_the_pinned_site(tmp_path, embedded_pool):
    workdir = experiment_copy("study_experiment", tmp_path)
    experiment = workdir / "Experiment.yaml"
    experiment.write_text(experiment.read_text().replace("  margin: 0.01\n", "  margin: 0.01\n  twin: chunked\n"))
    result = experiment_run(workdir, embedded_pool)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    runs = runs_table(workdir, "study")
    annex_of = annexes_by_job(workdir)
    twins: dict[str, dict[int, str]] = {}
    for ad in embedded_pool.schedd().history('HtcannexRule == "train_baseline"',
                                             ["ClusterId", "ProcId", "HtcannexWildcards"]):
        wildcards = json.loads(ad["HtcannexWildcards"])
        twins.setdefault(wildcards["run"], {})[int(wildcards["chunk"])] = annex_of[f"{ad['ClusterId']}.{ad['ProcId']}"]
    assert twins == {run_uuid: {1: "htcannex-expanse", 2: "htcannex-expanse"} for run_uuid in runs}
    for row in runs.values():  # each twin: epochs 1-4 once, in 2 jobs, resumed under its own run_uuid, at expanse
        expected = [f"epoch {e} seed {row['random_seed']} alpha {row['alpha']} site expanse" for e in range(1, 5)]
        assert expected in [path.joinpath("history").read_text().splitlines() for path in (workdir / "output").iterdir()]
    study = table(workdir / "results" / "study" / "compare" / "equivalence.tsv")
    assert {row["verdict"] for row in study} == {"identical (every delta 0)"}


@pytest.mark.slow
def test_a_study_that_finds_the_twins_not_equivalent_fails_the_run_naming_the_check(tmp_path, embedded_pool):
    # A resume bug: a resumed chunk restarts its schedule, so the loss is alpha over the epochs of this job.
    workdir = experiment_copy("study_experiment", tmp_path)
    script = workdir / "train.sh"
    script.write_text(script.read_text().replace("{'loss': $alpha / $epoch}", "{'loss': $alpha / $per_job}"))
    result = experiment_run(workdir, embedded_pool, "--retries", "0")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Error in rule check:" in output, output[-6000:]
    failed = [line for line in output.splitlines() if line.startswith("FAILED CHECK:")]
    assert failed == [f"FAILED CHECK: seed group alpha={alpha}, loss: study: not equivalent (90% CI [+{delta}, +{delta}] "
                      "beyond the margin +-0.01)" for alpha, delta in (("1", "0.25"), ("3", "0.75"))], output[-6000:]
    assert "equivalence study (results/study/compare/equivalence.tsv):" in output  # the table, printed
    assert "rerun with --config allow_not_equivalent=true" in output
    assert not (workdir / "results" / "study" / "compare" / "check.txt").exists()
    # A study of real differences on purpose passes with the override (only the check reruns).
    allowed = experiment_run(workdir, embedded_pool, "--config", "allow_not_equivalent=true")
    assert allowed.returncode == 0, (allowed.stdout + allowed.stderr)[-6000:]
    assert (workdir / "results" / "study" / "compare" / "check.txt").read_text().endswith(
        "all checks passed (study verdicts beyond the margin allowed: allow_not_equivalent)\n")
    # A training declared deterministic (study.bitwise): any difference from its twin is a bug, which no setting lets pass.
    experiment = workdir / "Experiment.yaml"
    experiment.write_text(experiment.read_text().replace("  margin: 0.01\n", "  margin: 0.01\n  bitwise: true\n"))
    strict = experiment_run(workdir, embedded_pool, "--config", "allow_not_equivalent=true")
    output = strict.stdout + strict.stderr
    failed = [line for line in output.splitlines() if line.startswith("FAILED CHECK:")]
    assert strict.returncode != 0 and len(failed) == 4, output[-6000:]
    assert all(": twin check: ERROR: differs from its twin" in line for line in failed)


def test_a_study_without_scipy_and_statsmodels_is_refused_naming_the_extra(tmp_path):
    workdir = experiment_copy("study_experiment", tmp_path)
    (workdir / "stub" / "statsmodels").mkdir(parents=True)
    (workdir / "stub" / "statsmodels" / "__init__.py").write_text("raise ImportError('No module named statsmodels')\n")
    env = dict(os.environ, PYTHONPATH=str(workdir / "stub"))  # a statsmodels that cannot be imported
    for verb in ("plan", "run"):
        result = run([str(BIN / "htcannex"), "experiment", verb, "Experiment.yaml", "--profile", str(PROFILE)], workdir, env)
        assert result.returncode != 0
        assert "the equivalence study needs scipy and statsmodels" in result.stderr, result.stderr[-3000:]
        assert "pip install 'snakemake-executor-plugin-htcannex[train]'" in result.stderr
    assert not (workdir / ".htcannex" / "jobs.log").exists()  # nothing was submitted
