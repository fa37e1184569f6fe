"""`snakemake -n` with an htcannex profile ends with the plan (run x chunk -> site).

Snakemake's dry run never loads the executor; the profile's `logger: [htcannex]`
prints the plan the executor would follow, and nothing is submitted. A real run
prints the plan once (the executor's), not twice, and its console and log file say what a run
without the plugin says.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from snakemake_executor_plugin_htcannex.sites.catalogue import load_catalogue
from snakemake_executor_plugin_htcannex.ops.plan import HEADING as PLAN_HEADING

HERE = Path(__file__).parent
REPO = HERE.parent
LOCAL_PROFILE = REPO / "profiles" / "local"
CHUNKS_WORKFLOW = HERE / "workflows" / "chunks"
PROTEIN_LM = REPO / "workflows" / "protein_lm" / "Snakefile"
CATALOGUE = load_catalogue(LOCAL_PROFILE / "htcannex.yaml")


@pytest.fixture
def spool(tmp_path):
    """Where the embedded pool would keep its queue if anything started it."""
    return tmp_path / "pool"


def snakemake(argv, cwd, spool, timeout=240, command="snakemake"):
    # A user with an empty config dir: `--profile local` finds only what `htcannex profiles install` put there.
    env = dict(os.environ, HTCANNEX_POOL_DIR=str(spool), XDG_CONFIG_HOME=str(spool.parent / "config"))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return subprocess.run([command, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def plan_tables(output: str) -> dict[str, dict[str, list[str]]]:
    """rule -> run -> sites per chunk, read from the plan after its heading up to the first
    line that is not part of it."""
    assert output.count(PLAN_HEADING) == 1, output[-3000:]
    sites = set(CATALOGUE.sites) | {"-"}
    tables, rows = {}, None
    for line in output.split(PLAN_HEADING, 1)[1].splitlines()[1:]:
        cells = line.split()
        if line.startswith("rule "):
            rows = tables.setdefault(cells[1].rstrip(":"), {})
        elif not cells or line.startswith("run \\"):
            continue
        elif rows is not None and len(cells) > 1 and {cell.rstrip("*") for cell in cells[1:]} <= sites:
            rows[cells[0]] = [cell.rstrip("*") for cell in cells[1:]]
        else:
            break
    return tables


def budget_jobs(output: str) -> int:
    """The jobs the plan's budget counts, over all its sites."""
    lines = output.split("htcannex budget", 1)[1].splitlines()[2:]
    return sum(int(line.split()[2]) for line in lines if line.split() and line.split()[0] in CATALOGUE.sites)


def assert_nothing_submitted(spool: Path, workdir: Path) -> None:
    # The osdf storage plugin makes the pool's (empty) origin directory; a started pool
    # would have left its pid, socket and queue next to it.
    assert {path.name for path in spool.glob("*")} <= {"osdf-origin"}
    assert not any(spool.glob("osdf-origin/**/*"))
    assert not (workdir / ".htcannex").exists()


def expected_sites(rule: str, run: str, chunks) -> list[str]:
    return [CATALOGUE.rotation.place(rule, {"run": run, "chunk": str(chunk)}).site for chunk in chunks]


@pytest.mark.parametrize("profile", ["clone", "installed"])
def test_dry_run_prints_the_rotation_plan_and_submits_nothing(tmp_path, spool, profile):
    workdir = tmp_path / "work"
    shutil.copytree(CHUNKS_WORKFLOW, workdir)
    if profile == "installed":
        assert snakemake(["profiles", "install"], tmp_path, spool, command="htcannex").returncode == 0
    result = snakemake(["-n", "--profile", "local" if profile == "installed" else str(LOCAL_PROFILE)],
                       workdir, spool)
    assert result.returncode == 0, result.stderr[-3000:]
    # Snakemake's own dry-run listing is all there, the plan after it.
    listing, plan = result.stdout.split(PLAN_HEADING)
    assert "rule train_chunk:" in listing and "This was a dry-run" in listing
    assert plan_tables(result.stdout) == {
        "train_chunk": {run: expected_sites("train_chunk", run, range(3)) for run in ("0", "1")}
    }
    assert budget_jobs(result.stdout) == 2 * 3  # each job once: none lost on the way to the plugin, none twice
    # round-robin starts run r on site r and moves one site on per chunk
    assert plan_tables(result.stdout)["train_chunk"]["1"][:2] == plan_tables(result.stdout)["train_chunk"]["0"][1:]
    assert_nothing_submitted(spool, workdir)
    assert not (workdir / "results").exists()


def test_dry_run_of_the_protein_lm_workflow_plans_every_rotated_rule(tmp_path, spool):
    result = snakemake(["-n", "--profile", str(LOCAL_PROFILE), "-s", str(PROTEIN_LM)], tmp_path, spool)
    assert result.returncode == 0, result.stderr[-3000:]
    tables = plan_tables(result.stdout)
    assert set(tables) == {"train_chunk", "train_baseline"}
    for rule, rows in tables.items():
        assert rows, rule
        for run, sites in rows.items():
            assert sites == expected_sites(rule, run, range(1, len(sites) + 1)), (rule, run)
    assert all(set(sites) == {"expanse"} for sites in tables["train_baseline"].values())  # pinned
    assert_nothing_submitted(spool, tmp_path)


def test_dry_run_with_a_bad_htcannex_yaml_names_file_key_and_fix(tmp_path, spool):
    workdir = tmp_path / "work"
    shutil.copytree(CHUNKS_WORKFLOW, workdir)
    (workdir / "htcannex.yaml").write_text("rotation: {train_chunk: {policy: round-robin, sites: [mars]}}\n"
                                           "sites: {here: {kind: pool}}\n")
    result = snakemake(["-n", "--profile", str(LOCAL_PROFILE), "--logger-htcannex-config", "htcannex.yaml"],
                       workdir, spool)
    assert result.returncode != 0
    assert "htcannex.yaml: rotation.train_chunk.sites" in result.stderr and "Fix:" in result.stderr
    assert PLAN_HEADING not in result.stdout


def test_dry_run_with_a_missing_htcannex_yaml_names_the_setting(tmp_path, spool):
    workdir = tmp_path / "work"
    shutil.copytree(CHUNKS_WORKFLOW, workdir)
    result = snakemake(["-n", "--profile", str(LOCAL_PROFILE), "--logger-htcannex-config", "nowhere.yaml"],
                       workdir, spool)
    assert result.returncode != 0
    assert f"{workdir / 'nowhere.yaml'}: (file): does not exist" in result.stderr
    assert "logger-htcannex-config" in result.stderr


@pytest.mark.slow
def test_a_real_run_prints_the_plan_once(tmp_path, embedded_pool):
    workdir = tmp_path / "work"
    shutil.copytree(CHUNKS_WORKFLOW, workdir)
    result = snakemake(["--profile", str(LOCAL_PROFILE), "--config", 'runs=["0"]', "chunks=1"],
                       workdir, embedded_pool.spool_dir)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (workdir / "results/run0/chunk0.txt").read_text() == "run 0 chunk 0\n"
    output = result.stdout + result.stderr
    assert plan_tables(output) == {"train_chunk": {"0": expected_sites("train_chunk", "0", [0])}}
    # The profile's logger plugin, idle in a real run, takes nothing from Snakemake's console and log file.
    assert "steps (100%) done" in output
    log_file = next((workdir / ".snakemake" / "log").glob("*.snakemake.log")).read_text()
    assert PLAN_HEADING in log_file and "steps (100%) done" in log_file


def test_dry_run_of_a_rotated_rule_without_its_chunk_wildcard_says_which(tmp_path, spool):
    (tmp_path / "Snakefile").write_text(
        'rule all:\n    input: "out/run0.txt"\n\n'
        'rule train_chunk:\n    output: "out/run{run}.txt"\n    shell: "touch {output}"\n'
    )
    result = snakemake(["-n", "--profile", str(LOCAL_PROFILE)], tmp_path, spool)
    assert result.returncode == 0, result.stderr[-3000:]  # Snakemake's dry run itself is fine
    assert PLAN_HEADING not in result.stdout
    assert "htcannex plan: rule train_chunk has rotation policy 'round-robin' but no wildcard 'chunk'" in result.stdout
