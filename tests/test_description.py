"""From a JobSpec to an htcondor2.Submit: resources, durations, files, annex pinning, quoting, injection."""
import getpass
import json
import os
import subprocess
import time
from pathlib import Path

import classad2
import htcondor2
import pytest

from snakemake_executor_plugin_htcannex.submit.description import (
    JobSpec,
    SubmitOptions,
    build_submit,
    transfer_root,
)
from snakemake_executor_plugin_htcannex.sites.placement import decided_at
from snakemake_executor_plugin_htcannex.submit.request import duration_category, job_request
from htcannex_pool import Pool
from htcannex_pool.quoting import parse_arguments, parse_environment
from htcannex_pool.remaps import remap, rules
from snakemake_executor_plugin_htcannex.submit.transfer_names import remap_entry
from snakemake_executor_plugin_htcannex.sites.catalogue import load_catalogue
from snakemake_executor_plugin_htcannex.sites.site import SiteRefusal
from snakemake_executor_plugin_htcannex.submit_language import SubmitValueError

REPO = Path(__file__).resolve().parents[1]
NAIRR = load_catalogue(REPO / "profiles" / "nairr" / "htcannex.yaml").sites
LOCAL_CATALOGUE = REPO / "profiles" / "local" / "htcannex.yaml"
ODD_ARGUMENTS = [
    "two words", "it's", 'say "hi"', "'both' \"kinds\"", "", "$HOME", "$(Cluster)", "$ENV(HOME)",
    "back\\slash", "semi;colon", "a=b", "ünïcödé", "  padded  ", "#not-a-comment", "''", '""',
]


@pytest.fixture
def options(tmp_path) -> SubmitOptions:
    return SubmitOptions(workdir=tmp_path, log_path=tmp_path / ".htcannex" / "jobs.log")


def spec(**overrides) -> JobSpec:
    values = dict(rule="train_chunk", jobid=3, argv=["/bin/sh", "-c", "true"],
                  wildcards={"run": "0", "chunk": "1"})
    return JobSpec(**{**values, **overrides})


def submitted_at(job: JobSpec, site, options) -> htcondor2.Submit:
    """`job`'s submit description at `site` (None: any slot), its request made and admitted as a run does."""
    return build_submit(job, decided_at(site, job_request(job.rule, job.resources, job.threads), job.rule), options)


def submit_for(options, site=None, **overrides) -> htcondor2.Submit:
    return submitted_at(spec(**overrides), site, options)


def with_image(options, image: str) -> SubmitOptions:
    """The options of a profile with `container-image: image`."""
    return SubmitOptions(**{**options.__dict__, "container_image": image})


def lines(submit: htcondor2.Submit) -> list[str]:
    return [line for line in str(submit).splitlines() if line != "queue"]


# --- resources --------------------------------------------------------------

def test_standard_resources_map_to_htcondor_requests(options):
    submit = submit_for(options, threads=4, resources={
        "mem_mb": 4096, "disk_mb": 20480, "gpu": 2, "gpu_model": "A100", "gpu_memory": "40GB",
        "gpu_capability": "8.0", "runtime": 90})
    expected = {
        "request_cpus": "4",
        "request_memory": "4096MB",
        "request_disk": "20480MB",  # explicit unit: request_disk's bare unit is KiB
        "request_gpus": "2",
        "gpus_minimum_memory": "40960MB",
        "gpus_minimum_capability": "8.0",
        "requirements": 'regexp("A100", TARGET.GPUs_DeviceName, "i")',
        "allowed_execute_duration": "5400",
        "MY.JobDurationCategory": '"Medium"',
    }
    assert {key: submit[key] for key in expected} == expected


@pytest.mark.parametrize(
    "resources, memory, disk",
    [
        ({"mem": "2GB", "disk": "1.5TB"}, "2048MB", f"{1536 * 1024}MB"),
        ({"mem_mb": 1000, "mem_mib": 954, "mem": "1000 MB"}, "1000MB", None),  # Snakemake's expansion
        ({"mem_mib": 2048}, "2048MB", None),
        ({}, None, None),
    ],
)
def test_memory_and_disk_spellings(options, resources, memory, disk):
    submit = dict(submit_for(options, resources=resources))
    assert submit.get("request_memory") == memory
    assert submit.get("request_disk") == disk


def test_no_gpu_means_no_gpu_commands(options):
    submit = dict(submit_for(options, resources={"gpu_model": "A100", "gpu_memory": "8GB"}))
    assert not {"request_gpus", "gpus_minimum_memory", "requirements"} & set(submit)


@pytest.mark.parametrize(
    "resources, field",
    [
        ({"mem_mb": "lots"}, "resources.mem_mb"),
        ({"disk": "10 XB"}, "resources.disk"),
        ({"runtime": "soon"}, "resources.runtime"),
        ({"gpu": "two"}, "resources.gpu"),
        ({"gpu": True}, "resources.gpu"),
        ({"gpu": -1}, "resources.gpu"),
        ({"gpu": 1, "gpu_model": 'A100") || true || ("'}, "resources.gpu_model"),
        ({"gpu": 1, "gpu_capability": "eight"}, "resources.gpu_capability"),
    ],
)
def test_bad_resources_are_refused_naming_rule_and_field(options, resources, field):
    with pytest.raises(SubmitValueError) as error:
        submit_for(options, resources=resources)
    assert error.value.rule == "train_chunk" and error.value.field == field
    assert str(error.value).startswith(f"rule train_chunk: {field} = ")


@pytest.mark.parametrize(
    "runtime, category",
    [("1m", "Medium"), ("19h59m", "Medium"), ("20h", "Long"), ("39h59m", "Long")],
)
def test_duration_category_boundaries(options, runtime, category):
    submit = submit_for(options, resources={"runtime": runtime})
    assert submit["MY.JobDurationCategory"] == f'"{category}"'


@pytest.mark.parametrize("runtime", ["40h", "45h", 2400])
def test_forty_hours_and_more_are_refused_with_the_split_hint(options, runtime):
    with pytest.raises(SubmitValueError, match=r"split the chunk: fewer epochs per job and more chunks"):
        submit_for(options, resources={"runtime": runtime})


def test_duration_category_function():
    assert duration_category(20 * 3600 - 1, "r") == "Medium"
    assert duration_category(20 * 3600, "r") == "Long"


# --- sites ------------------------------------------------------------------

def test_annex_site_pins_the_job_to_its_annex(options):
    submit = submit_for(options, site=NAIRR["expanse"], resources={"gpu": 1, "runtime": "2h"})
    assert submit["MY.TargetAnnexName"] == '"htcannex-expanse"'
    assert submit["MY.HtcannexSite"] == '"expanse"'
    # and off every slot that is not that annex's (their START does not look at TargetAnnexName)
    requirements = classad2.ExprTree(submit["requirements"])
    job = classad2.ClassAd({"TargetAnnexName": classad2.ExprTree(submit["MY.TargetAnnexName"]).eval()})

    def takes(slot: dict) -> bool:
        return requirements.eval(job, classad2.ClassAd(slot))

    assert takes({"AnnexName": "htcannex-expanse"}) is True
    assert takes({"AnnexName": "htcannex-delta"}) is False
    assert takes({"Name": "slot1@campus"}) is False
    job["TargetAnnexName"] = "htcannex-delta"  # retargeted (recovery.py edits this one attribute)
    assert takes({"AnnexName": "htcannex-delta"}) is True


def test_pool_site_and_no_site_do_not_target_an_annex(options):
    assert "MY.TargetAnnexName" not in dict(submit_for(options, site=NAIRR["ospool"]))
    assert "MY.TargetAnnexName" not in dict(submit_for(options))


def test_site_refusal_happens_before_a_submit_exists(options):
    with pytest.raises(SiteRefusal, match="CPU-only|GPUs"):
        submit_for(options, site=NAIRR["expanse"], resources={"gpu": 2})


def test_whole_node_site_drops_the_memory_request(options):
    submit = dict(submit_for(options, site=NAIRR["aws"], resources={"mem_mb": 8000, "gpu": 1}))
    assert "request_memory" not in submit


def test_identity_attributes(options):
    submit = submit_for(options, jobid=12, attempt=2)
    assert (submit["MY.HtcannexRule"], submit["MY.HtcannexJobId"], submit["MY.HtcannexAttempt"]) == (
        '"train_chunk"', "12", "2")
    assert submit["output"] == str(options.logs_dir / "train_chunk-12-2.out")
    assert submit["error"] == str(options.logs_dir / "train_chunk-12-2.err")
    assert submit["log"] == str(options.log_path)
    assert submit["initialdir"] == str(options.workdir)


def test_wildcards_and_signature_identify_the_job(options, tmp_path):
    odd = {"run": 'lr=0.1 "x" $HOME\n', "chunk": "3"}
    first = submit_for(options, wildcards=odd, outputs=["results/a.pt"], jobid=4, attempt=1)
    assert json.loads(classad2.ExprTree(first.expand("MY.HtcannexWildcards")).eval()) == odd
    # the signature survives a Snakemake restart (new job ids, attempts) but not other outputs or workdirs
    again = submit_for(options, wildcards=odd, outputs=["results/a.pt"], jobid=9, attempt=2)
    other_output = submit_for(options, outputs=["results/b.pt"])
    elsewhere = submit_for(SubmitOptions(**{**options.__dict__, "workdir": tmp_path / "elsewhere"}),
                           outputs=["results/a.pt"])
    assert first["MY.HtcannexSignature"] == again["MY.HtcannexSignature"]
    assert len({first["MY.HtcannexSignature"], other_output["MY.HtcannexSignature"],
                elsewhere["MY.HtcannexSignature"]}) == 3


# --- files ------------------------------------------------------------------

def test_file_transfer_keeps_relative_paths(options, tmp_path):
    submit = submit_for(
        SubmitOptions(**{**options.__dict__, "workflow_sources": ("Snakefile", "rules/train.smk")}),
        inputs=["results/r0/ckpt_0.pt", str(tmp_path / "data" / "x.csv"), "osdf:///ns/data.tar"],
        outputs=["results/r0/ckpt_1.pt", "logs/r0/1.log"],
    )
    assert submit["should_transfer_files"] == "YES"
    assert submit["preserve_relative_paths"] == "true"
    # a failed command terminates with its exit code instead of holding for missing outputs,
    # and HTCondor does not retry it behind Snakemake's back
    assert (submit["when_to_transfer_output"], submit["success_exit_code"], submit["max_retries"]) == (
        "ON_SUCCESS", "0", "0")
    assert submit["transfer_input_files"] == (
        "results/r0/ckpt_0.pt, data/x.csv, osdf:///ns/data.tar, Snakefile, rules/train.smk")
    assert submit["transfer_output_files"] == "results/r0/ckpt_1.pt, logs/r0/1.log"


def test_directory_transfers_keep_the_trailing_slash_meaning(options, tmp_path):
    submit = submit_for(options, inputs=["data/", "models", f"{tmp_path}/refs/"])
    assert submit["transfer_input_files"] == "data/, models, refs/"


def test_output_remaps_send_sandbox_files_to_osdf(options):
    stored = ".snakemake/storage/osdf/ns/run0/ckpt_1.pt"
    submit = submit_for(options, outputs=["results/r0/log.txt", stored, stored + ".sha256"],
                        output_remaps={stored: "osdf:///ns/run0/ckpt_1.pt",
                                       stored + ".sha256": "osdf:///ns/run0/ckpt_1.pt.sha256"})
    assert submit["transfer_output_remaps"] == (
        f'"{stored} = osdf:///ns/run0/ckpt_1.pt; {stored}.sha256 = osdf:///ns/run0/ckpt_1.pt.sha256"')


@pytest.mark.parametrize(
    "remaps, words",
    [
        ({"not/listed.pt": "osdf:///ns/x"}, "only a listed output"),
        ({"out.pt": "https://example.org/x"}, "only osdf://"),
        ({"out.pt": "osdf:///ns/x\nqueue 5"}, "newline"),
    ],
)
def test_bad_output_remaps_are_refused(options, remaps, words):
    with pytest.raises(SubmitValueError, match=words):
        submit_for(options, outputs=["out.pt"], output_remaps=remaps)


def test_names_a_transfer_list_cannot_hold_travel_under_stand_ins(options, tmp_path):
    """An input goes in through a link with a plain name; an output waits in a listed directory remapped to its
    own directory (transfer_names.py), as HTCondor reads the remaps (htcannex_pool/remaps.py)."""
    sweep = tmp_path / "lr=0.1,wd=0.01"
    sweep.mkdir()
    (sweep / "model.pt").write_text("weights")
    submit = submit_for(options, inputs=["lr=0.1,wd=0.01/model.pt", "plain.txt"],
                        outputs=["lr=0.1,wd=0.01/eval.txt", " lead, 1.txt", "plain-out.txt"])
    link, plain = submit["transfer_input_files"].split(", ")
    assert plain == "plain.txt" and (tmp_path / link).is_symlink() and (tmp_path / link).read_text() == "weights"
    sweep_out, top_out, plain_out = submit["transfer_output_files"].split(", ")
    assert plain_out == "plain-out.txt" and sweep_out.startswith(".htcannex-out-")
    assert rules(submit["transfer_output_remaps"].strip('"')) == [(sweep_out, "lr=0.1,wd=0.01"), (top_out, ".")]


@pytest.mark.parametrize("destination", ["a;b", " lead", "trail ", "back\\", "a=b,c", "x\\;y", "ünï cödé"])
def test_a_remap_reads_back_as_the_same_path(destination):
    """Each entry reads back as HTCondor reads it, naming the same path (`./x/.` is `x`); the next entry too."""
    value = "; ".join([remap_entry("a=b", destination), remap_entry("next", "n")])
    assert os.path.normpath(remap(value, "a=b")) == os.path.normpath(destination)
    assert os.path.normpath(remap(value, "a=b/x")) == os.path.normpath(f"{destination}/x")
    assert remap(value, "next") == "n"


def test_a_workdir_with_a_semicolon_is_refused_with_the_reason(tmp_path):
    workdir = tmp_path / "a;b"
    options = SubmitOptions(workdir=workdir, log_path=workdir / ".htcannex" / "jobs.log")
    with pytest.raises(SubmitValueError, match="cannot bring a job's stdout and stderr back to a path with ';'"):
        submit_for(options)


def test_an_input_directory_a_transfer_list_cannot_hold_is_refused_with_the_reason(options, tmp_path):
    (tmp_path / "lr=0.1,wd=0.01").mkdir()
    with pytest.raises(SubmitValueError, match="a directory cannot travel under another name"):
        submit_for(options, inputs=["lr=0.1,wd=0.01"])


def test_job_environment_wins_over_the_profile(options):
    profile = SubmitOptions(**{**options.__dict__, "environment": {"BACKEND": "origin", "KEEP": "1"}})
    submit = submit_for(profile, environment={"BACKEND": "htcondor"})
    assert parse_environment(submit.expand("environment")) == {"BACKEND": "htcondor", "KEEP": "1"}


def test_shared_filesystem_mode_transfers_nothing(options):
    shared = SubmitOptions(**{**options.__dict__, "shared_fs": True})
    submit = dict(submit_for(shared, inputs=["a"], outputs=["b"]))
    assert submit["should_transfer_files"] == "NO"
    assert not {"transfer_input_files", "transfer_output_files", "preserve_relative_paths"} & set(submit)


def test_on_a_shared_filesystem_a_container_image_is_read_where_it_is_and_the_pool_accepts_the_job(
        options, embedded_pool, tmp_path):
    # condor_submit refuses to transfer an image when should_transfer_files = NO (real 25.14.0 pool), so a
    # shared-filesystem job reads its image in place; a registry image is pulled on any filesystem.
    shared = SubmitOptions(**{**options.__dict__, "shared_fs": True})
    (tmp_path / "train.sif").write_text("not really an image")
    path, registry = (submit_for(with_image(shared, image)) for image in ("train.sif", "docker://python:3.11"))
    assert (path["should_transfer_files"], path["transfer_container"]) == ("NO", "false")
    assert "transfer_container" not in registry
    for submit in (path, registry):
        submit["hold"] = "true"
        cluster = embedded_pool.schedd().submit(submit).cluster()
        ad = embedded_pool.schedd().query(f"ClusterId == {cluster}", ["ContainerImageSource", "TransferInput"])[0]
        assert "TransferInput" not in ad and ad["ContainerImageSource"] in ("local", "docker")
    with pytest.raises(SubmitValueError, match="path on the shared filesystem"):
        submit_for(with_image(shared, "osdf:///ospool/images/train.sif"))


@pytest.mark.parametrize(
    "field, overrides, words",
    [
        ("input", {"inputs": ["/etc/passwd"]}, "only files under the workdir"),
        ("input", {"inputs": ["../outside.txt"]}, "only files under the workdir"),
        ("input", {"inputs": ["osdf:///ns/a,b.txt"]}, "an OSDF object's name cannot contain a comma"),
        ("input", {"inputs": ["https://example.org/x"]}, "only osdf://"),
        ("output file", {"outputs": ["osdf:///ns/out"]}, "storage plugin"),
    ],
)
def test_untransferable_paths_are_refused(options, field, overrides, words):
    with pytest.raises(SubmitValueError) as error:
        submit_for(options, **overrides)
    assert error.value.field == field and words in str(error.value)


def test_sources_outside_the_workdir_travel_from_the_directory_above_both(tmp_path):
    """`-s ../workflows/w/Snakefile` or a module: initialdir is the directory above the workdir and
    the sources, every path is relative to it, and each keeps its place next to the others."""
    workdir = tmp_path / "project"
    sources = ["../workflows/w/Snakefile", "../workflows/w/rules/a.smk", "config.yaml"]
    options = SubmitOptions(workdir=workdir, log_path=workdir / ".htcannex" / "jobs.log", workflow_sources=sources,
                            transfer_root=transfer_root(workdir, [*sources, "results/in.txt"]))
    assert options.sandbox_workdir == "project"
    submit = submit_for(options, inputs=["results/in.txt"], outputs=["results/out.txt"])
    assert submit["initialdir"] == str(tmp_path.resolve())
    assert submit["transfer_input_files"].split(", ") == [
        "project/results/in.txt", "workflows/w/Snakefile", "workflows/w/rules/a.smk", "project/config.yaml"]
    assert submit["transfer_output_files"] == "project/results/out.txt"
    # A self-checkpoint file is written where the job runs: HTCondor looks for it from the sandbox root.
    checkpointing = submit_for(options, resources={"htcannex_submit": '{"transfer_checkpoint_files": "ckpt.pt"}'})
    assert checkpointing["transfer_checkpoint_files"] == "project/ckpt.pt"
    assert transfer_root(workdir, ["config.yaml", "osdf:///ns/x"]) is None


def test_container_universe(options):
    submit = submit_for(with_image(options, "osdf:///ospool/images/train.sif"))
    assert (submit["universe"], submit["container_image"]) == ("container", "osdf:///ospool/images/train.sif")
    local = submit_for(with_image(options, "images/train.sif"))
    assert local["container_image"] == "images/train.sif"
    assert submit_for(options)["universe"] == "vanilla"
    with pytest.raises(SubmitValueError, match="container image"):
        submit_for(with_image(options, "a b.sif"))
    # A rule's own container (direct_command.py) wins over the profile's image, and is checked the same way.
    own = submit_for(with_image(options, "images/train.sif"), container_image="docker://alpine:3.20")
    assert (own["universe"], own["container_image"]) == ("container", "docker://alpine:3.20")
    assert submit_for(options, container_image="docker://alpine:3.20")["universe"] == "container"
    with pytest.raises(SubmitValueError, match="rule train_chunk: container = 'docker://a b': a container image is"):
        submit_for(options, container_image="docker://a b")


# --- the command, the environment and the escape hatch -----------------------

def test_odd_arguments_round_trip_through_htcondor_quoting(options):
    submit = submit_for(options, argv=["/usr/bin/printf", *ODD_ARGUMENTS])
    assert submit["executable"] == "/usr/bin/printf"
    assert submit["transfer_executable"] == "false"
    # expand() resolves $(DOLLAR) as condor_submit does; the pool's parser applies the manual's rules
    assert parse_arguments(submit.expand("arguments")) == ODD_ARGUMENTS


def test_a_shell_command_reaches_the_shell_intact(options):
    command = "printf '%s|' \"a b\" 'it'\"'\"'s' \"$((6*7))\" && echo"
    submit = submit_for(options, argv=["/bin/sh", "-c", command])
    argv = [submit.expand("executable"), *parse_arguments(submit.expand("arguments"))]
    ran = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert ran.stdout == "a b|it's|42|\n"


def test_environment_uses_new_syntax(options):
    environment = {"PLAIN": "1", "SPACED": "a b", "QUOTED": "it's \"x\"", "DOLLAR": "$HOME"}
    submit = submit_for(SubmitOptions(**{**options.__dict__, "environment": environment}))
    assert parse_environment(submit.expand("environment")) == environment
    with pytest.raises(SubmitValueError, match="environment"):
        submit_for(SubmitOptions(**{**options.__dict__, "environment": {"BAD-NAME": "1"}}))


def test_escape_hatch_passes_valid_commands(options):
    extras = {"max_retries": 2, "+WantGPULab": True, "MY.GPUJobLength": "short",
              "periodic_release": "NumJobStarts < 3", "requirements": "TARGET.HasCHTCStaging"}
    submit = submit_for(SubmitOptions(**{**options.__dict__, "extra_commands": extras}),
                        resources={"gpu": 1, "gpu_model": "H200",
                                   "htcannex_submit": '{"batch_name": "sweep-1", "max_retries": 3}'})
    expected = {
        "max_retries": "3",  # the rule's value wins over the profile's
        "MY.WantGPULab": "true",
        "MY.GPUJobLength": '"short"',
        "periodic_release": "NumJobStarts < 3",
        "batch_name": "sweep-1",
        "requirements": '(regexp("H200", TARGET.GPUs_DeviceName, "i")) && (TARGET.HasCHTCStaging)',
    }
    assert {key: submit[key] for key in expected} == expected


@pytest.mark.parametrize(
    "extras, words",
    [
        ({"executable": "/bin/evil"}, "set by htcannex"),
        ({"request_memory": "1GB"}, "mem_mb"),
        ({"+TargetAnnexName": "other"}, "set by htcannex"),
        ({"MY.HtcannexSite": "x"}, "set by htcannex"),
        ({"not_a_command": 1}, "not a submit command htcannex passes through"),
        ({"periodic_remove": "JobStatus =="}, "not a ClassAd expression"),
        ({"+Bad-Name": 1}, "not a submit command"),
        ({"max_retries": [1, 2]}, "string, number or boolean"),
    ],
)
def test_escape_hatch_refusals(options, extras, words):
    with pytest.raises(SubmitValueError, match=words):
        submit_for(SubmitOptions(**{**options.__dict__, "extra_commands": extras}))


# A job-ad attribute htcannex's own commands produce, each with the fix its refusal names.
OWNED_ATTRIBUTES = [
    ("+Cmd", "submit command executable"), ("+Arguments", "submit command arguments"),
    ("MY.Requirements", "plain `requirements` command"), ("+Iwd", "submit command initialdir"),
    ("+Environment", "the profile's environment"), ("+TransferInput", "the rule's input"),
    ("+UserLog", "submit command log"), ("MY.RequestMemory", "mem_mb"),
    ("+targetannexname", "choose sites in htcannex.yaml"),
]


@pytest.mark.parametrize("key, fix", OWNED_ATTRIBUTES)
def test_rule_escape_hatch_cannot_set_attributes_htcannex_owns(options, key, fix):
    with pytest.raises(SubmitValueError) as refused:
        submit_for(options, resources={"htcannex_submit": json.dumps({key: "/tmp"})})
    message = str(refused.value)
    assert message.startswith(f"rule train_chunk: htcannex_submit[{key!r}]"), message
    assert f"cannot set job attribute {key.split('.')[-1].lstrip('+')}: it is set by" in message
    assert fix in message


@pytest.mark.parametrize("key", ["+JobDurationCategory", "+ProjectName"])
def test_escape_hatch_passes_attributes_htcannex_leaves_alone(options, key):
    submit = submit_for(options, resources={"runtime": 60, "htcannex_submit": json.dumps({key: "Long"})})
    assert submit[f"MY.{key[1:]}"] == '"Long"'


def test_site_escape_hatch_sits_between_profile_and_rule(options, tmp_path):
    catalogue = tmp_path / "htcannex.yaml"
    catalogue.write_text("submit: {max_retries: 1, batch_name: all}\n"
                         "sites:\n  ospool: {kind: pool, submit: {max_retries: 2, +ProjectName: p1}}\n")
    loaded = load_catalogue(catalogue)
    profile = SubmitOptions(**{**options.__dict__, "extra_commands": loaded.submit_commands})
    at_ospool = submit_for(profile, site=loaded.sites["ospool"])
    assert (at_ospool["max_retries"], at_ospool["batch_name"], at_ospool["MY.ProjectName"]) == ("2", "all", '"p1"')
    ruled = submit_for(profile, site=loaded.sites["ospool"], resources={"htcannex_submit": "{max_retries: 3}"})
    assert ruled["max_retries"] == "3"


def test_rule_escape_hatch_must_be_a_mapping(options):
    with pytest.raises(SubmitValueError, match="resources.htcannex_submit"):
        submit_for(options, resources={"htcannex_submit": "max_retries=2"})


# --- injection ----------------------------------------------------------------

INJECTIONS = [
    ("command argument 2", {"argv": ["/bin/sh", "-c", "true\nexecutable = /bin/evil"]}),
    ("input", {"inputs": ["data/run\nexecutable=/bin/evil"]}),
    ("output file", {"outputs": ["results/x\r\nqueue 1000"]}),
    ("resources.gpu_model", {"resources": {"gpu": 1, "gpu_model": "A100\n+Evil = 1"}}),
    ("command argument 1", {"argv": ["/bin/sh", "nul\x00byte"]}),
]


class RecordingSchedd:
    """Stands for a schedd in the submit path: records what reaches it."""

    def __init__(self):
        self.received = []

    def submit(self, description, count=1, itemdata=None):
        self.received.append(str(description))


@pytest.mark.parametrize("field, overrides", INJECTIONS, ids=[field for field, _ in INJECTIONS])
def test_injection_is_refused_and_never_reaches_a_schedd(options, field, overrides):
    schedd = RecordingSchedd()
    with pytest.raises(SubmitValueError) as error:
        schedd.submit(submit_for(options, **overrides))
    assert error.value.rule == "train_chunk" and error.value.field == field
    assert "newline" in str(error.value)
    assert schedd.received == []


def test_injection_through_the_profile_is_refused(options):
    for change in ({"environment": {"A": "1\nexecutable=/bin/evil"}},
                   {"container_image": "img.sif\nuniverse = vanilla"},
                   {"extra_commands": {"batch_name": "x\nexecutable=/bin/evil"}},
                   {"extra_commands": {"+Note": "x\nexecutable=/bin/evil"}}):
        with pytest.raises(SubmitValueError, match="newline"):
            submit_for(SubmitOptions(**{**options.__dict__, **change}))


def test_macros_in_values_stay_literal(options):
    submit = submit_for(options, argv=["/bin/echo", "$ENV(HOME)", "$(Cluster)"],
                        inputs=["data/$ENV(HOME).txt"])
    assert parse_arguments(submit.expand("arguments")) == ["$ENV(HOME)", "$(Cluster)"]
    assert submit.expand("transfer_input_files") == "data/$ENV(HOME).txt"


def test_every_rendered_line_is_one_of_our_commands(options):
    submit = submit_for(options, argv=["/usr/bin/printf", *ODD_ARGUMENTS], inputs=["a b/c'd.txt"],
                        resources={"runtime": "1h", "mem_mb": 100})
    rendered = lines(submit)
    assert len(rendered) == len(dict(submit))
    assert [line.split(" = ", 1)[0] for line in rendered] == list(dict(submit))
    assert dict(htcondor2.Submit(str(submit))) == dict(submit)  # re-parsing gives the same commands


def test_rule_name_with_a_newline_is_refused(options):
    with pytest.raises(SubmitValueError, match="control characters"):
        submit_for(options, rule="train\nexecutable=/bin/evil")


def test_any_other_rule_label_names_the_job_and_a_safe_log_file(options):
    # A group job's label (job_spec.rule_label) or an unnamed rule's number.
    submit = submit_for(options, rule="a, b (group my-group/x)")
    assert classad2.ExprTree(submit["MY.HtcannexRule"]).eval() == "a, b (group my-group/x)"
    assert Path(submit["error"]).name.startswith("a_b_group_my-group_x_-")


# --- end to end through the embedded pool ---------------------------------------

@pytest.fixture
def local_pool(tmp_path_factory):
    pool = Pool(tmp_path_factory.mktemp("pool"), idle_exit_s=120, cycle_s=0.05, slots=[])
    pool.ensure_running()
    yield pool
    pool.stop()


def run_in_pool(pool, workdir: Path, directory: str, argv_tail: list[str]):
    """Submit a chunk reading <directory>/ckpt_0.pt and writing <directory>/ckpt_1.pt (its argv
    appended) on the site rotation picks, with an annex up there and another elsewhere."""
    (workdir / directory).mkdir(parents=True, exist_ok=True)
    (workdir / directory / "ckpt_0.pt").write_text("epoch 0\n")
    catalogue = load_catalogue(LOCAL_CATALOGUE)
    site = catalogue.sites[catalogue.rotation.place("train_chunk", {"run": "0", "chunk": "1"}).site]
    for annex_site in (site, catalogue.sites["ospool"]):
        pool.create_annex(annex_site.annex_name, owner=getpass.getuser(), lifetime_s=annex_site.lifetime_s,
                          **annex_site.slot_shape())
    source, target = f"{directory}/ckpt_0.pt".lstrip("./"), f"{directory}/ckpt_1.pt".lstrip("./")
    script = (f"import sys, pathlib; pathlib.Path({target!r}).write_text("
              f"pathlib.Path({source!r}).read_text() + repr(sys.argv[1:]))")
    options = SubmitOptions(workdir=workdir, log_path=workdir / ".htcannex" / "jobs.log")
    options.logs_dir.mkdir(parents=True, exist_ok=True)
    job = spec(argv=["/usr/bin/env", "python3", "-c", script, *argv_tail], inputs=[source], outputs=[target],
               resources={"mem_mb": 512, "runtime": "5m"})
    result = pool.schedd().submit(submitted_at(job, site, options))
    constraint = f"ClusterId == {result.cluster()}"
    deadline = time.time() + 30
    while not pool.schedd().history(constraint, ["JobStatus"], 1):
        held = pool.schedd().query(f"{constraint} && JobStatus == 5", ["HoldReason"])
        assert not held, held[0]["HoldReason"]
        assert time.time() < deadline, "the job did not finish within 30 s"
        time.sleep(0.1)
    assert pool.schedd().history(constraint, ["ExitCode"], 1)[0]["ExitCode"] == 0
    # HTCondor 23+ writes the slot's ad, AnnexName included, as the execute event's ExecuteProps.
    events = htcondor2.JobEventLog(str(options.log_path)).events(0)
    executed = [event["ExecuteProps"]["AnnexName"] for event in events
                if event.type == htcondor2.JobEventType.EXECUTE]
    assert executed == [site.annex_name]  # only on the rotated site's annex
    return (workdir / target).read_text()


@pytest.mark.slow
def test_job_runs_on_its_annex_with_its_argv_intact(local_pool, tmp_path):
    output = run_in_pool(local_pool, tmp_path, ".", ODD_ARGUMENTS)
    assert output == "epoch 0\n" + repr(ODD_ARGUMENTS)


@pytest.mark.slow
def test_nested_outputs_come_back_to_the_same_relative_path(local_pool, tmp_path):
    output = run_in_pool(local_pool, tmp_path, "results/r0", [])
    assert output == "epoch 0\n[]"
    assert not (tmp_path / "ckpt_1.pt").exists()  # not flattened to its basename


def test_a_job_without_snakemake_gets_a_tree_only_for_the_output_directories_its_inputs_do_not_make(options):
    """With preserve_relative_paths an input's directories arrive with it; each item more in the input transfer
    makes a 25.x shadow likelier to tell the starter to wait 5 s before starting the job (output_directories.py)."""
    chained = submit_for(options, inputs=["steps/0/3.txt"], outputs=["steps/0/4.txt"], needs_output_directories=True,
                         ships_workflow_sources=False)
    assert chained["transfer_input_files"] == "steps/0/3.txt"
    first = submit_for(options, outputs=["steps/0/0.txt", "logs/0.log"], needs_output_directories=True,
                       inputs=["steps/0/in.txt"], ships_workflow_sources=False)
    tree = first["transfer_input_files"].split(", ")[1]
    assert sorted(path.relative_to(tree) for path in Path(tree).rglob("*")) == [Path("logs")]


def test_for_a_real_pool_a_job_without_snakemake_is_sent_no_output_directory_tree(tmp_path):
    """On a real pool the job's shell makes them: a job with no input then transfers nothing, which a 25.x shadow
    never answers with a 5-s retry."""
    options = SubmitOptions(workdir=tmp_path, log_path=tmp_path / "jobs.log", few_transfer_items=True)
    submit = submit_for(options, outputs=["steps/0/0.txt"], needs_output_directories=True, ships_workflow_sources=False)
    assert "transfer_input_files" not in submit
