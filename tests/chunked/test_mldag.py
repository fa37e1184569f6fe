"""MLDAG experiments taken unchanged: `htcannex experiment plan | run EXPERIMENT.yaml --profile P`."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from snakemake_executor_plugin_htcannex.sites.catalogue import load_catalogue
from snakemake_executor_plugin_htcannex.sites.site import annex_name

from .conftest import BIN, PROFILE, annexes_by_job, pool_env, run

EXPERIMENT = Path(__file__).parent / "experiment"


@pytest.fixture
def experiment_dir(tmp_path):
    shutil.copytree(EXPERIMENT, tmp_path, dirs_exist_ok=True)
    return tmp_path


def edited(directory: Path, edit) -> Path:
    experiment = yaml.safe_load((directory / "Experiment.yaml").read_text())
    edit(experiment)
    (directory / "Experiment.yaml").write_text(yaml.safe_dump(experiment))
    return directory


def plan(directory: Path, *options: str) -> subprocess.CompletedProcess:
    return run([str(BIN / "htcannex"), "experiment", "plan", "Experiment.yaml", "--profile", str(PROFILE), *options],
               directory, None, timeout=120)


def chunk_rows(result: subprocess.CompletedProcess) -> list[list[str]]:
    """The plan's run, chunk, site, command rows (the first block, under its header)."""
    return [line.split() for line in result.stdout.split("\n\n")[0].splitlines()[1:]]


def with_resources(directory: Path, resources: dict) -> str:
    (directory / "resources.yaml").write_text(yaml.safe_dump(resources))
    return "resources.yaml"


def test_plan_prints_runs_by_chunks_sites_and_commands(experiment_dir):
    result = plan(experiment_dir)
    assert result.returncode == 0, result.stderr
    rows = chunk_rows(result)
    # alpha: {type: range, stop: 3} is MLDAG's range(0, 3): 3 runs; epochs 3 in chunks of 1: 3 chunks.
    assert len(rows) == 9 and len({row[0] for row in rows}) == 3
    catalogue = load_catalogue(PROFILE / "htcannex.yaml")
    for run_uuid, chunk, site, *argv in rows:
        assert site == catalogue.rotation.place("train_chunk", {"run": run_uuid, "chunk": chunk}).site
        # arguments = pretrain.sh $(epoch) $(epochs_per_job) $(run_uuid) $(random_seed) $(alpha) $(optimizer)
        assert argv[:5] == ["/bin/bash", "pretrain.sh", chunk, "1", run_uuid]
        assert argv[6] in ("0", "1", "2") and argv[7] == "adamw"
    assert sorted({row[9] for row in rows}) == ["0", "1", "2"]


@pytest.mark.parametrize("spec, values", [
    ({"type": "range", "stop": 3}, ["0", "1", "2"]),
    ({"type": "range", "start": 1, "stop": 7, "step": 3}, ["1", "4"]),
    ({"type": "list", "value": [0.1, "1e-3"]}, ["0.1", "1e-3"]),
    ({"type": "value", "value": "adam", "description": "one value"}, ["adam"]),
])
def test_each_var_kind_with_mldags_defaults(experiment_dir, spec, values):
    edited(experiment_dir, lambda e: e["vars"].update(alpha=spec))
    result = plan(experiment_dir)
    assert result.returncode == 0, result.stderr
    assert sorted({row[9] for row in chunk_rows(result)}) == sorted(values)


def gpu_template(e):
    e["submit_template"] = e["submit_template"].replace("request_cpus = 1", "request_cpus = 1\nrequest_gpus = 1")


def test_a_site_the_template_cannot_run_at_is_skipped_in_the_plan(experiment_dir):
    # {resource.mem_mb} is 4096 at delta by resources.yaml: more than a delta node has (1GB).
    result = plan(experiment_dir, "--resources", with_resources(experiment_dir, {"delta": {"mem_mb": 4096}}))
    assert result.returncode == 0, result.stderr
    rotation = load_catalogue(PROFILE / "htcannex.yaml").rotation
    skipped = []
    for run_uuid, chunk, site, *_ in chunk_rows(result):
        order = list(rotation.order("train_chunk", {"run": run_uuid, "chunk": chunk}))
        if order[0] == "delta":  # the next site of its rotation, marked
            skipped.append(f"{run_uuid}/{chunk}")
            assert site == order[1] + "*"
        else:
            assert site == order[0]
    assert skipped
    note = next(line for line in result.stdout.splitlines() if line.startswith("  * run/chunk"))
    assert sorted(note.split(": ")[0].removeprefix("  * run/chunk ").split(", ")) == sorted(skipped)
    assert "delta skipped: submit_template command request_memory = 4096 contradicts site delta" in note
    budget = result.stdout.split("htcannex budget")[1]
    assert "\ndelta " not in budget and "core_hour_budget 10" in budget


def test_a_chunk_no_site_can_run_is_marked_impossible_once_and_plan_fails(experiment_dir):
    result = plan(edited(experiment_dir, gpu_template))
    assert result.returncode == 1 and "9 of 9 jobs cannot run" in result.stderr, result.stderr
    assert [row[2] for row in chunk_rows(result)] == ["!"] * 9
    # One reason for all 9 chunks, each site's refusal once: a few lines, not one block per chunk.
    notes = result.stdout.split("htcannex plan")[1].split("htcannex budget")[0]
    impossible = [line for line in notes.splitlines() if line.startswith("  !")]
    assert impossible == ["  ! all 9 jobs: cannot run: no site of rule train_chunk's rotation can run this job, "
                          "so no annex is requested for it and it is not submitted:"]
    assert notes.count("submit_template command request_gpus = 1 contradicts site") == 6
    assert "submit_template command request_gpus = 1 contradicts site expanse" in notes


def test_run_refuses_before_submitting_when_no_chunk_can_run(experiment_dir, embedded_pool):
    edited(experiment_dir, gpu_template)
    result = run([str(BIN / "htcannex"), "experiment", "run", "Experiment.yaml", "--profile", str(PROFILE)],
                 experiment_dir, pool_env(embedded_pool))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "none of the 9 chunks can run" in result.stderr and "nothing was submitted" in result.stderr
    schedd = embedded_pool.schedd()
    assert not schedd.query("true", ["ClusterId"]) and not list(schedd.history("true", ["ClusterId"]))
    assert not (experiment_dir / "results").exists()


@pytest.mark.parametrize("edit, words", [
    (lambda e: e.update(submit_template=e["submit_template"].replace("queue", "+TargetAnnexName = \"mine\"\nqueue")),
     "job attribute TargetAnnexName is set by htcannex from the rotation"),
    (lambda e: e.update(submit_template=e["submit_template"].replace("queue", "+iwd = \"/tmp\"\nqueue")),
     "job attribute iwd is set by htcannex"),
    (lambda e: e["vars"].update(alpha={"type": "value", "value": "1\nexecutable = /bin/evil"}), "control character"),
    (lambda e: e["vars"].update(alpha={"type": "range", "start": 0.1, "stop": 1}), "is not a whole number"),
    (lambda e: e["vars"].update(epochs_per_job={"type": "value", "value": 2}), "not a multiple of vars.epochs_per_job"),
    (lambda e: e.pop("submit_template"), "no submit_template"),
    # A {resource.*} no site has, from no source: one line naming the three places it can come from.
    (lambda e: e.update(submit_template=e["submit_template"].replace("{resource.mem_mb}", "{resource.memory}")),
     "{resource.memory} is known at no site the chunks can go to (expanse, bridges2, anvil, delta, jetstream2, aws). "
     "Give it as `memory:` in the sites' catalogue entries (htcannex.yaml), in --resources resources.yaml"),
    # A $(var) nothing defines, with its line, and the nearest name.
    (lambda e: e.update(submit_template=e["submit_template"].replace("$(optimizer)", "$(optimiser) --dropout $(dropout)")),
     "submit_template line 12 (arguments = pretrain.sh $(epoch) $(epochs_per_job) $(run_uuid) $(random_seed) $(alpha) "
     "$(optimiser) --dropout $(dropout)): $(optimiser) is defined nowhere"),
    (lambda e: e.update(submit_template=e["submit_template"].replace("$(optimizer)", "$(optimiser)")),
     "Did you mean $(optimizer)? Add optimiser to vars, or fix the name"),
    (lambda e: e.update(submit_template=e["submit_template"].replace("$(optimizer)", "$(dropout)")),
     "$(dropout) is defined nowhere: not a var"),
    # Unknown keys, with the nearest valid one.
    (lambda e: e.update(varz=e.pop("vars")), "unknown key 'varz': an experiment has name, submit_template, vars, study; did you mean 'vars'?"),
    (lambda e: e.update(epochs_per_job={"type": "value", "value": 1}),
     "unknown key 'epochs_per_job'"),
    (lambda e: e["vars"]["alpha"].update(stpo=4), "type range does not take stpo (did you mean stop?)"),
    (lambda e: e.update(study={"metric": "loss", "file": "output/metrics.json", "margin": 0.1}),
     "study.file must name $(run_uuid) (a run and its twin leave their own)"),
    (lambda e: e.update(study={"metric": "loss"}), "study: give metric (the number to compare), file"),
])
def test_refusals_name_what_to_fix_before_anything_is_submitted(experiment_dir, edit, words):
    result = plan(edited(experiment_dir, edit))
    assert result.returncode == 2 and words in result.stderr, result.stderr


@pytest.mark.slow
def test_run_trains_every_epoch_once_hopping_between_annexes(experiment_dir, embedded_pool):
    result = run([str(BIN / "htcannex"), "experiment", "run", "Experiment.yaml", "--profile", str(PROFILE)],
                 experiment_dir, pool_env(embedded_pool))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "not passing WANDB_API_KEY to jobs" in output and "a1bbea51509891a9" not in output

    records = {}
    for record in sorted(experiment_dir.glob("results/toy_pretraining/checkpoints/distributed/*/*.vars.json")):
        chunk_vars = json.loads(record.read_text())
        records.setdefault(chunk_vars["run_uuid"], []).append(chunk_vars)
    assert len(records) == 3
    annex_of = annexes_by_job(experiment_dir)
    ads = embedded_pool.schedd().history('HtcannexRule == "train_chunk"', [
        "ClusterId", "ProcId", "HtcannexWildcards", "JobDurationCategory", "RequestMemory", "Environment",
        "WhenToTransferOutput"])
    hops = {}
    for ad in ads:
        wildcards = json.loads(ad["HtcannexWildcards"])
        hops.setdefault(wildcards["run"], []).append((int(wildcards["chunk"]), annex_of[f"{ad['ClusterId']}.{ad['ProcId']}"]))
        # The template's commands, as a submit file's: its category, {resource.mem_mb} of the site, its transfer
        # policy; the secret withheld, the other variable passed.
        assert ad["JobDurationCategory"] == "Medium" and ad["WhenToTransferOutput"] == "ON_EXIT"
        assert ad["RequestMemory"] in (1024, 2048)
        assert "TOY_MODE=fast" in ad["Environment"] and "WANDB_API_KEY" not in ad["Environment"]
    for run_uuid, chunk_vars in records.items():
        # The VARS MLDAG gives each chunk: epoch = the last epoch it trains to, continue_from_checkpoint from chunk 2.
        assert [(v["epoch"], "continue_from_checkpoint" in v) for v in chunk_vars] == [(1, False), (2, True), (3, True)]
        alpha, seed = chunk_vars[0]["alpha"], chunk_vars[0]["random_seed"]
        # Every epoch once, resumed from the previous chunk's transferred output, with the run's swept value.
        history = (experiment_dir / "output" / run_uuid / "history").read_text().splitlines()
        assert history == [f"epoch {e} seed {seed} alpha {alpha} optimizer adamw" for e in (1, 2, 3)]
        annexes = [annex for _, annex in sorted(hops[run_uuid])]
        assert len(annexes) == 3 and len(set(annexes)) == 3, annexes
    assert sorted(v[0]["alpha"] for v in records.values()) == [0, 1, 2]


def test_run_skips_the_site_the_template_cannot_run_at(experiment_dir, embedded_pool):
    def one_chunk(e):
        e["vars"].update(epochs={"type": "value", "value": 1}, alpha={"type": "value", "value": 0})

    edited(experiment_dir, one_chunk)
    run_uuid, chunk, site = chunk_rows(plan(experiment_dir))[0][:3]
    resources = with_resources(experiment_dir, {site: {"mem_mb": 4096}})  # more than a node there has
    planned = chunk_rows(plan(experiment_dir, "--resources", resources))[0][2]
    assert planned.endswith("*") and planned != site + "*"

    result = run([str(BIN / "htcannex"), "experiment", "run", "Experiment.yaml", "--profile", str(PROFILE),
                  "--resources", resources], experiment_dir, pool_env(embedded_pool))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert f"skips site {site}: submit_template command request_memory = 4096 contradicts site {site}" in output
    annex_of = annexes_by_job(experiment_dir)
    ads = embedded_pool.schedd().history('HtcannexRule == "train_chunk"', ["ClusterId", "ProcId"])
    assert [annex_of[f"{ad['ClusterId']}.{ad['ProcId']}"] for ad in ads] == [annex_name(planned.removesuffix("*"))]


def disk_template(e):
    e["submit_template"] = e["submit_template"].replace("request_disk = 100MB", "request_disk = {resource.disk}")


def test_resource_disk_comes_from_resources_yaml_over_the_catalogue(experiment_dir):
    edited(experiment_dir, disk_template)
    assert plan(experiment_dir).returncode == 0  # every local site's catalogue entry has disk: 4GB
    too_big = {site: {"disk": "100GB"} for site in ("expanse", "bridges2", "anvil", "delta", "jetstream2")}
    result = plan(experiment_dir, "--resources", with_resources(experiment_dir, too_big))
    assert result.returncode == 0, result.stderr
    assert {row[2].rstrip("*") for row in chunk_rows(result)} == {"aws"}  # the one site resources.yaml left alone
    assert ("skipped: submit_template command request_disk = 100GB contradicts site delta: rule train_chunk cannot "
            "run at site delta: it asks for 100GB of disk and a job at delta has 4GB") in result.stdout


@pytest.mark.parametrize("default_resources, words", [
    ({"mem_mb": 512, "disk_mb": 1024, "runtime": 30}, None),  # {resource.disk} = 1024MB from default-resources
    ({"mem_mb": 512, "runtime": 30},
     "{resource.disk} is known at no site the chunks can go to (expanse, bridges2, anvil, delta, jetstream2, aws). "
     "Give it as `disk:` in the sites' catalogue entries (htcannex.yaml), in --resources resources.yaml "
     "(`SITE: {disk: ...}`) or default-resources disk_mb in the profile"),
])
def test_resource_disk_without_a_catalogue_value_comes_from_default_resources(experiment_dir, default_resources, words):
    profile = experiment_dir / "profile"
    shutil.copytree(PROFILE, profile)
    catalogue = profile / "htcannex.yaml"
    catalogue.write_text(catalogue.read_text().replace(" disk: 4GB,", ""))
    settings = yaml.safe_load((profile / "config.yaml").read_text())
    (profile / "config.yaml").write_text(yaml.safe_dump(settings | {"default-resources": default_resources}))
    edited(experiment_dir, disk_template)
    result = run([str(BIN / "htcannex"), "experiment", "plan", "Experiment.yaml", "--profile", str(profile)],
                 experiment_dir, None, timeout=120)
    if words is None:
        assert result.returncode == 0 and {row[2].rstrip("*") for row in chunk_rows(result)} != {"!"}, result.stderr
    else:
        assert result.returncode == 2 and words in result.stderr, result.stderr


def test_run_passes_snakemakes_own_options_through(experiment_dir, embedded_pool):
    result = run([str(BIN / "htcannex"), "experiment", "run", "Experiment.yaml", "--profile", str(PROFILE),
                  "--keep-going", "-j", "2", "-n", "--rerun-incomplete"], experiment_dir, pool_env(embedded_pool))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "This was a dry-run (flag -n)" in output and "train_chunk" in output
    assert not list(embedded_pool.schedd().history("true", ["ClusterId"]))  # -n: nothing submitted


def test_a_twin_longer_than_the_pinned_sites_lifetime_is_impossible_for_the_lifetime_not_a_command(tmp_path):
    shutil.copytree(Path(__file__).parent / "study_experiment", tmp_path, dirs_exist_ok=True)
    # 14 epochs in chunks of 2: 7 chunks of 5 minutes; the twin's one job, 35 minutes, outlasts expanse's 30-minute annex.
    edited(tmp_path, lambda e: e["vars"].update(epochs={"type": "value", "value": 14}))
    result = plan(tmp_path)
    assert result.returncode == 1 and "4 of 32 jobs cannot run" in result.stderr, result.stderr
    twins = result.stdout.split("twin: every epoch in one job, pinned")[1].split("\n\n")[0].splitlines()[2:]
    assert [row.split()[1:3] for row in twins] == [["7", "!"]] * 4
    assert ("  - rule train_baseline cannot run at site expanse: its runtime 35m is longer than the annex lifetime at "
            "expanse (30m)") in result.stdout
    assert "`twin: chunked` under study:" in result.stderr
    # A twin in the run's chunks, every one on the pinned site, fits the lifetime.
    edited(tmp_path, lambda e: e["study"].update(twin="chunked"))
    result = plan(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    twins = result.stdout.split("twin: the run's chunks, every one pinned")[1].split("\n\n")[0].splitlines()[2:]
    assert sorted(row.split()[1:3] for row in twins) == sorted([[str(chunk), "expanse"] for chunk in range(1, 8)] * 4)
