"""The site catalogue: loading, its errors (file + key + fix), SYSTEM_TABLE agreement, refusals."""
import copy
import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from htcondor_cli.annex_validate import SYSTEM_TABLE, validate_constraints

from snakemake_executor_plugin_htcannex.catalogue import HtcannexConfigError, load_catalogue
from snakemake_executor_plugin_htcannex.site import Admission, ResourceRequest, annex_name

REPO = Path(__file__).resolve().parents[1]
NAIRR = REPO / "profiles" / "nairr" / "htcannex.yaml"
LOCAL = REPO / "profiles" / "local" / "htcannex.yaml"

BASE = {
    "pool": "local",
    "rotation": {"train_chunk": {"policy": "round-robin", "sites": ["expanse", "laptop"]}},
    "annex": {"mode": "auto", "max_annexes": 2, "core_hour_budget": 100, "idle_timeout": "10m"},
    "sites": {
        "expanse": {
            "kind": "annex", "system": "expanse", "queue": "gpu-shared", "cpus": 10, "memory": "92GB",
            "gpus": 1, "gpu_type": "V100", "gpu_memory": "32GB", "gpu_capability": 7.0,
            "lifetime": "4h", "project": "CHANGE_ME", "login": "CHANGE_ME",
        },
        "laptop": {"kind": "annex", "facts": "catalogue", "cpus": 1, "memory": "2GB",
                   "max_lifetime": "1h", "lifetime": "30m"},
        "ospool": {"kind": "pool", "max_runtime": "40h"},
    },
}


def write(tmp_path, document) -> Path:
    path = tmp_path / "htcannex.yaml"
    path.write_text(yaml.safe_dump(document) if not isinstance(document, str) else document)
    return path


def load_with(tmp_path, edit):
    document = copy.deepcopy(BASE)
    edit(document)
    return load_catalogue(write(tmp_path, document))


def config_error(tmp_path, edit) -> HtcannexConfigError:
    with pytest.raises(HtcannexConfigError) as error:
        load_with(tmp_path, edit)
    assert str(error.value).startswith(str(tmp_path / "htcannex.yaml"))  # names the file
    assert "Fix: " in str(error.value)
    return error.value


def test_base_catalogue_loads_with_table_defaults(tmp_path):
    catalogue = load_with(tmp_path, lambda d: None)
    expanse = catalogue.sites["expanse"]
    assert (expanse.cpus, expanse.memory_mb, expanse.gpus) == (10, 92 * 1024, 1)
    assert expanse.max_lifetime_s == 48 * 3600  # filled from SYSTEM_TABLE
    assert not expanse.whole_node and expanse.memory_request == "pass"
    assert catalogue.annex.idle_timeout_s == 600 and catalogue.annex.max_annexes == 2
    assert catalogue.rotation.policy_for("train_chunk").sites == ("expanse", "laptop")
    assert catalogue.pool == "local"


def test_table_fills_facts_the_catalogue_leaves_out(tmp_path):
    def whole_node_cpu(document):
        document["sites"]["anvil"] = {"kind": "annex", "system": "anvil", "queue": "wholenode", "lifetime": "2h"}
    anvil = load_with(tmp_path, whole_node_cpu).sites["anvil"]
    queue = SYSTEM_TABLE["anvil"].queues["wholenode"]
    assert anvil.whole_node and anvil.memory_request == "drop"
    assert (anvil.cpus, anvil.memory_mb, anvil.gpus) == (queue["cores_per_node"], queue["ram_per_node"], 0)
    assert anvil.max_lifetime_s == queue["max_duration"]


@pytest.mark.parametrize(
    "edit, key, words",
    [
        (lambda d: d["sites"]["expanse"].update(memroy="1GB"), "sites.expanse.memroy", "unknown key"),
        (lambda d: d.update(pools="x"), "pools", "unknown key"),
        (lambda d: d["sites"]["expanse"].pop("kind"), "sites.expanse.kind", "is missing"),
        (lambda d: d["sites"]["expanse"].update(cpus="ten"), "sites.expanse.cpus", "'ten'"),
        (lambda d: d["sites"]["expanse"].update(kind="cloud"), "sites.expanse.kind", "'cloud'"),
        (lambda d: d["sites"]["expanse"].update(memory="92 gigs"), "sites.expanse.memory", "not a size"),
        (lambda d: d["sites"]["expanse"].update(lifetime="4 hours"), "sites.expanse.lifetime", "not a duration"),
        (lambda d: d["sites"]["expanse"].pop("lifetime"), "sites.expanse.lifetime", "is missing"),
        (lambda d: d["sites"]["expanse"].update(system="expance"), "sites.expanse.system", "SYSTEM_TABLE"),
        (lambda d: d["sites"]["expanse"].update(queue="gpu-large"), "sites.expanse.queue", "not a queue"),
        (lambda d: d["sites"]["expanse"].pop("queue"), "sites.expanse.queue", "is missing"),
        (lambda d: d["sites"]["expanse"].update(cpus=41), "sites.expanse.cpus", "more than"),
        (lambda d: d["sites"]["expanse"].update(memory="400GB"), "sites.expanse.memory", "more than"),
        (lambda d: d["sites"]["expanse"].update(gpus=4), "sites.expanse.gpus", "more than"),
        (lambda d: d["sites"]["expanse"].update(max_lifetime="72h"), "sites.expanse.max_lifetime", "longer"),
        (lambda d: d["sites"]["expanse"].update(lifetime="49h"), "sites.expanse.lifetime", "longer"),
        (lambda d: d["sites"]["expanse"].update(whole_node=True), "sites.expanse.whole_node", "allocation"),
        (lambda d: d["sites"]["expanse"].update(nodes=2), "sites.expanse.nodes", "more than"),
        (lambda d: d["sites"]["expanse"].update(queue="shared"), "sites.expanse.gpus", "CPU-only"),
        (lambda d: d["sites"]["expanse"].pop("project"), "sites.expanse", "project"),
        (lambda d: d["sites"]["ospool"].update(lifetime="4h"), "sites.ospool.lifetime", "kind pool"),
        (lambda d: d["sites"]["laptop"].update(max_runtime="4h"), "sites.laptop.max_runtime", "kind annex"),
        (lambda d: d["sites"]["laptop"].pop("cpus"), "sites.laptop.cpus", "is missing"),
        (lambda d: d["sites"]["ospool"].update(requirements="OpSys =="), "sites.ospool.requirements",
         "not a ClassAd"),
        (lambda d: d["sites"].update({"Big Site": {"kind": "pool"}}), "sites.Big Site", "not a valid name"),
        (lambda d: d["rotation"]["train_chunk"]["sites"].append("expance"), "rotation.train_chunk.sites[2]",
         "unknown site 'expance'"),
        (lambda d: d["rotation"]["train_chunk"]["sites"].append("laptop"), "rotation.train_chunk.sites[2]",
         "repeats"),
        (lambda d: d["rotation"]["train_chunk"].update(policy="random"), "rotation.train_chunk.policy", "'random'"),
        (lambda d: d["rotation"]["train_chunk"].pop("sites"), "rotation.train_chunk.sites", "empty"),
        (lambda d: d.update(run_wildcard="run-id"), "run_wildcard", "'run-id'"),
        (lambda d: d["annex"].update(mode="yes"), "annex.mode", "'yes'"),
        (lambda d: d["annex"].update(max_per_site=3), "annex.max_per_site", "more than max_annexes"),
        (lambda d: d.update(sites={}), "sites", "is empty"),
        (lambda d: d.update(submit={"executable": "/bin/evil"}), "submit.executable", "set by htcannex"),
        (lambda d: d["sites"]["ospool"].update(submit={"nope": 1}), "sites.ospool.submit.nope",
         "not a submit command"),
        (lambda d: d["sites"]["ospool"].update(submit={"+Note": "a\nb"}), "sites.ospool.submit.+Note", "newline"),
        (lambda d: d.update(submit={"max_retries": [1]}), "submit.max_retries", "[1]"),
    ],
)
def test_catalogue_errors_name_file_key_and_fix(tmp_path, edit, key, words):
    error = config_error(tmp_path, edit)
    assert error.key == key
    assert words in str(error)


def test_escape_hatch_commands_load_for_every_job_and_per_site(tmp_path):
    def extras(document):
        document["submit"] = {"max_retries": 2}
        document["sites"]["ospool"]["submit"] = {"+ProjectName": "my_project"}
    catalogue = load_with(tmp_path, extras)
    assert catalogue.submit_commands == {"max_retries": 2}
    assert catalogue.sites["ospool"].submit_commands == {"+ProjectName": "my_project"}
    assert catalogue.sites["expanse"].submit_commands == {}


def test_bridges2_gpu_type_must_be_one_the_table_lists(tmp_path):
    def bridges(document):
        document["sites"]["bridges2"] = {"kind": "annex", "system": "bridges2", "queue": "GPU-shared",
                                         "gpu_type": "a100", "gpus": 1, "cpus": 5, "memory": "62GB",
                                         "lifetime": "4h"}
    error = config_error(tmp_path, bridges)
    assert error.key == "sites.bridges2.gpu_type" and "v100-32" in str(error)


def test_gpu_shared_queue_needs_the_share_spelled_out(tmp_path):
    def bridges(document):
        document["sites"]["bridges2"] = {"kind": "annex", "system": "bridges2", "queue": "GPU-shared",
                                         "gpu_type": "v100-32", "gpus": 1, "lifetime": "4h"}
    error = config_error(tmp_path, bridges)
    assert error.key == "sites.bridges2.cpus" and "share" in str(error)


def test_a_bare_off_is_the_off_mode(tmp_path):
    text = yaml.safe_dump(BASE).replace("mode: auto", "mode: off")
    assert load_catalogue(write(tmp_path, text)).annex.mode == "off"


@pytest.mark.parametrize(
    "text, key",
    [("sites: [a, b", "(file)"), ("", "(top level)"), ("- a\n- b\n", "(top level)")],
)
def test_unreadable_files(tmp_path, text, key):
    with pytest.raises(HtcannexConfigError) as error:
        load_catalogue(write(tmp_path, text))
    assert error.value.key == key


def test_missing_file_names_the_setting(tmp_path):
    with pytest.raises(HtcannexConfigError, match="--htcannex-config"):
        load_catalogue(tmp_path / "nope.yaml")


def test_nairr_catalogue_loads_and_agrees_with_system_table():
    catalogue = load_catalogue(NAIRR)
    assert set(catalogue.sites) == {"expanse", "bridges2", "anvil", "delta", "jetstream2", "aws", "chtc", "ospool"}
    assert catalogue.rotation.policy_for("train_chunk").sites == (
        "expanse", "bridges2", "anvil", "delta", "jetstream2", "aws")
    assert catalogue.rotation.policy_for("train_baseline").policy == "pinned"
    for site in catalogue.sites.values():
        if site.kind == "pool":
            continue
        assert site.gpus >= 1, f"{site.name} should be a GPU queue"
        assert site.lifetime_s <= site.max_lifetime_s
        if site.facts == "catalogue":
            assert site.system not in SYSTEM_TABLE  # only Jetstream2 is ours
            continue
        system = SYSTEM_TABLE[site.system]
        queue = system.get_constraints(site.queue, site.gpus, site.gpu_type_flag)
        assert queue is not None
        if "max_duration" in queue:
            assert site.max_lifetime_s <= queue["max_duration"]
        if "cores_per_node" in queue:
            assert site.cpus <= queue["cores_per_node"] and site.memory_mb <= queue["ram_per_node"]
            assert site.gpus <= queue["gpus_per_node"]
        request = site.annex_arguments()
        validate_constraints(  # the check `htcondor annex create` makes: must not raise
            system=request.system, queue_name=request.queue, nodes=request.nodes,
            lifetime_in_seconds=request.lifetime_s, allocation=request.project, cpus=request.cpus,
            mem_mb=request.mem_mb, idletime_in_seconds=0, gpus=request.gpus, gpu_type=request.gpu_type,
        )
    assert catalogue.sites["ospool"].max_runtime_s == 40 * 3600


def test_placeholders_load_but_block_annex_creation():
    expanse = load_catalogue(NAIRR).sites["expanse"]
    with pytest.raises(HtcannexConfigError) as error:
        expanse.annex_request()
    assert error.value.key == "sites.expanse.project" and "CHANGE_ME" in str(error.value)


def test_annex_request_and_slot_shape(tmp_path):
    catalogue = load_with(tmp_path, lambda d: d["sites"]["expanse"].update(project="abc123", login="jdoe"))
    request = catalogue.sites["expanse"].annex_request()
    assert (request.name, request.system, request.queue, request.nodes) == ("htcannex-expanse", "expanse",
                                                                            "gpu-shared", 1)
    assert (request.cpus, request.mem_mb, request.gpus, request.gpu_type) == (10, 92 * 1024, 1, None)
    assert (request.lifetime_s, request.project, request.login) == (4 * 3600, "abc123", "jdoe")
    assert catalogue.sites["expanse"].slot_shape() == {
        "cpus": 10, "memory_mb": 92 * 1024, "gpus": 1, "gpu_memory_mb": 32 * 1024, "gpu_capability": 7.0}
    assert catalogue.sites["expanse"].annex_core_hours == 40.0
    with pytest.raises(HtcannexConfigError, match="kind"):
        catalogue.sites["ospool"].annex_request()


def test_local_catalogue_fits_the_embedded_pool():
    catalogue = load_catalogue(LOCAL)
    nairr = load_catalogue(NAIRR)
    assert catalogue.pool == "local"
    assert set(catalogue.sites) == set(nairr.sites)
    assert catalogue.rotation == nairr.rotation
    for site in catalogue.sites.values():
        shape = site.slot_shape()
        assert shape["cpus"] == 1 and shape["gpus"] == 0 and 1024 <= shape["memory_mb"] <= 2048
        assert site.lifetime_s <= 3600
        assert site.annex_request().name == annex_name(site.name)


# --- refusals before submit ---------------------------------------------------

@pytest.fixture(scope="module")
def nairr():
    return load_catalogue(NAIRR).sites


@pytest.mark.parametrize(
    "site, request_, words",
    [
        ("expanse", ResourceRequest(cpus=16), "16 cpus"),
        ("expanse", ResourceRequest(gpus=2), "2 GPUs"),
        ("expanse", ResourceRequest(gpus=1, gpu_memory_mb=40 * 1024), "GPU memory"),
        ("expanse", ResourceRequest(gpus=1, gpu_capability=8.0), "capability 8.0"),
        ("expanse", ResourceRequest(gpus=1, gpu_model="A100"), "GPU model 'A100'"),
        ("expanse", ResourceRequest(memory_mb=200 * 1024), "200GB of memory"),
        ("expanse", ResourceRequest(runtime_s=5 * 3600), "longer than the annex lifetime"),
        ("ospool", ResourceRequest(runtime_s=41 * 3600), "longest job the pool runs"),
    ],
)
def test_site_refuses_what_it_cannot_run(nairr, site, request_, words):
    verdict = nairr[site].admit(request_, rule="train_chunk")
    assert verdict.request is None
    assert verdict.refusal.startswith(f"rule train_chunk cannot run at site {site}: ")
    assert words in verdict.refusal


def test_gpus_on_a_cpu_only_queue_are_refused(tmp_path):
    laptop = load_with(tmp_path, lambda d: None).sites["laptop"]
    assert "CPU-only" in laptop.admit(ResourceRequest(gpus=1), rule="r").refusal


def test_runtime_refusal_says_how_to_split(nairr):
    verdict = nairr["delta"].admit(ResourceRequest(runtime_s=10 * 3600), rule="train_chunk")
    assert re.search(r"split the chunk .*fewer epochs per job.*up to 2d", verdict.refusal)


def test_whole_node_memory_rules(tmp_path):
    def rules(document):
        for name, rule in (("drop", "drop"), ("refuse", "refuse")):
            document["sites"][name] = {"kind": "annex", "system": "anvil", "queue": "wholenode",
                                       "lifetime": "2h", "memory_request": rule}
    sites = load_with(tmp_path, rules).sites
    asked = ResourceRequest(cpus=4, memory_mb=8192)
    assert sites["drop"].admit(asked, rule="r") == Admission(replace(asked, memory_mb=None))
    assert re.search("memory_request: refuse.*set sites.refuse.memory_request to drop",
                     sites["refuse"].admit(asked, rule="r").refusal)


def test_a_fitting_request_passes_unchanged(nairr):
    request = ResourceRequest(cpus=4, memory_mb=16 * 1024, gpus=1, gpu_model="v100", gpu_memory_mb=16 * 1024,
                              gpu_capability=7.0, runtime_s=3 * 3600)
    assert nairr["expanse"].admit(request, rule="train_chunk") == Admission(request)
    on_aws = replace(request, gpu_model="A10G", gpu_capability=8.6)
    assert nairr["aws"].admit(on_aws, rule="train_chunk") == Admission(replace(on_aws, memory_mb=None))  # whole instance
