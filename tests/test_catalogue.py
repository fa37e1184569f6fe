"""catalogue.py: loading htcannex.yaml, its errors (file + key + fix), SYSTEM_TABLE agreement."""
import pytest
import yaml
from catalogues import BASE, LOCAL, NAIRR, load_with, write
from htcondor_cli.annex_validate import SYSTEM_TABLE, validate_constraints

from snakemake_executor_plugin_htcannex.sites.catalogue import HtcannexConfigError, load_catalogue
from snakemake_executor_plugin_htcannex.sites.site import MemoryRequest, SiteKind, annex_name


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
    assert not expanse.whole_node and expanse.memory_request is MemoryRequest.PASS
    assert catalogue.annex.idle_timeout_s == 600 and catalogue.annex.max_annexes == 2
    assert catalogue.rotation.policy_for("train_chunk").sites == ("expanse", "laptop")
    assert catalogue.pool == "local"


def test_table_fills_facts_the_catalogue_leaves_out(tmp_path):
    def whole_node_cpu(document):
        document["sites"]["anvil"] = {"kind": "annex", "system": "anvil", "queue": "wholenode", "lifetime": "2h"}
    anvil = load_with(tmp_path, whole_node_cpu).sites["anvil"]
    queue = SYSTEM_TABLE["anvil"].queues["wholenode"]
    assert anvil.whole_node and anvil.memory_request is MemoryRequest.DROP
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
        (lambda d: d["annex"].update(max_per_site=2), "annex.max_per_site", "never has more than one live annex"),
        (lambda d: d["annex"].update(max_per_site=True), "annex.max_per_site", "never has more than one live annex"),
        (lambda d: d["sites"]["laptop"].update(create="later"), "sites.laptop.create", "'later'"),
        (lambda d: d["sites"]["ospool"].update(create="manual"), "sites.ospool.create", "kind pool"),
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


@pytest.mark.parametrize("key", ["+Cmd", "+Arguments", "MY.Requirements", "+Iwd", "+Environment",
                                 "+TransferInput", "+UserLog", "MY.RequestMemory", "+targetannexname"])
@pytest.mark.parametrize("where", ["submit", "sites.ospool.submit"])
def test_catalogue_escape_hatch_cannot_set_attributes_htcannex_owns(tmp_path, key, where):
    def edit(document):
        (document if where == "submit" else document["sites"]["ospool"])["submit"] = {key: "/tmp"}
    error = config_error(tmp_path, edit)
    assert error.key == f"{where}.{key}"
    assert f"cannot set job attribute {key.split('.')[-1].lstrip('+')}: it is set by" in str(error)


def test_escape_hatch_commands_load_for_every_job_and_per_site(tmp_path):
    def extras(document):
        document["submit"] = {"max_retries": 2}
        document["sites"]["ospool"]["submit"] = {"+ProjectName": "my_project", "+JobDurationCategory": "Long"}
    catalogue = load_with(tmp_path, extras)
    assert catalogue.submit_commands == {"max_retries": 2}
    assert catalogue.sites["ospool"].submit_commands == {"+ProjectName": "my_project", "+JobDurationCategory": "Long"}
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
    assert set(catalogue.sites) == {"expanse", "bridges2", "anvil", "delta", "jetstream2", "jetstream2-g3large",
                                    "aws", "chtc", "ospool"}
    # Jetstream2 is not in SYSTEM_TABLE: `htcondor annex create` cannot make it, the user starts it.
    assert {name for name, site in catalogue.sites.items() if site.manual} == {"jetstream2", "jetstream2-g3large"}
    # GPU memory as devices report it, not the nominal size (an A10G reports 23028 MiB of its 24 GB).
    assert catalogue.sites["aws"].gpu_memory_mb == 23028
    assert catalogue.rotation.policy_for("train_chunk").sites == (
        "expanse", "bridges2", "anvil", "delta", "jetstream2", "aws")
    assert catalogue.rotation.policy_for("train_baseline").policy == "pinned"
    for site in catalogue.sites.values():
        if site.kind is SiteKind.POOL:
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
