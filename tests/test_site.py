"""site.py: what a site can run (Site.admit's verdict) and what its annex request is."""
import re
from dataclasses import replace

import pytest
from catalogues import NAIRR, load_with

from snakemake_executor_plugin_htcannex.sites.catalogue import HtcannexConfigError, load_catalogue
from snakemake_executor_plugin_htcannex.sites.site import Admission, ResourceRequest


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
