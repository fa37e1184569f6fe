"""The executor side: OSDF files become URL transfers, and inside the job the osdf
provider (backend ``htcondor``) finds what HTCondor dropped and leaves outputs where
the submit says HTCondor picks them up."""

import hashlib
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from snakemake.io import IOFile, flag
from snakemake_interface_common.exceptions import WorkflowError

from snakemake_executor_plugin_htcannex.submit import osdf_transfer
from snakemake_storage_plugin_osdf import StorageProvider, StorageProviderSettings
from snakemake_storage_plugin_osdf.integrity import CorruptObjectError

RUN = "osdf:///ospool/ap40/data/jdoe/protein_lm/run0"


def provider(prefix: Path, **settings) -> StorageProvider:
    return StorageProvider(
        local_prefix=prefix,
        logger=logging.getLogger("test-osdf"),
        settings=StorageProviderSettings(**settings),
    )


def storage_file(provider_: StorageProvider, url: str):
    """A Snakemake IOFile for a storage query, built the way Snakemake flags them."""
    obj = provider_.object(url)
    return IOFile(flag(str(obj.local_path()), "storage_object", obj))


@pytest.fixture
def access_point(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    workdir = tmp_path / "ap"
    return provider(workdir / ".snakemake/storage/osdf", backend="local", local_origin=str(origin))


def test_plan_turns_osdf_files_into_url_transfers_and_keeps_local_ones(access_point):
    plan = osdf_transfer.plan(
        inputs=[storage_file(access_point, f"{RUN}/ckpt-4.pt"), IOFile("data/train.csv")],
        outputs=[storage_file(access_point, f"{RUN}/ckpt-5.pt"), IOFile("logs/chunk5.log")],
    )
    assert plan.local_inputs == ("data/train.csv",)
    assert plan.local_outputs == ("logs/chunk5.log",)
    assert plan.input_urls == (f"{RUN}/ckpt-4.pt", f"{RUN}/ckpt-4.pt.sha256")
    local = ".snakemake/storage/osdf/ospool/ap40/data/jdoe/protein_lm/run0/ckpt-5.pt"
    assert plan.output_files == (local, local + ".sha256")
    assert plan.output_remaps == {
        local: f"{RUN}/ckpt-5.pt",
        local + ".sha256": f"{RUN}/ckpt-5.pt.sha256",
    }
    assert plan.inputs == ("data/train.csv", f"{RUN}/ckpt-4.pt", f"{RUN}/ckpt-4.pt.sha256")
    assert plan.outputs == ("logs/chunk5.log", local, local + ".sha256")
    assert plan.environment == {"SNAKEMAKE_STORAGE_OSDF_BACKEND": "htcondor"}


def test_plan_without_osdf_files_keeps_the_files_and_still_sets_the_backend(access_point):
    plan = osdf_transfer.plan([IOFile("a.txt")], [IOFile("b.txt")])
    assert (plan.inputs, plan.outputs) == (("a.txt",), ("b.txt",))
    assert not plan.input_urls and not plan.output_remaps
    # the job's Snakefile still registers the osdf provider: it must not go looking
    # for the access point's origin or token on the execute point
    assert plan.environment == {"SNAKEMAKE_STORAGE_OSDF_BACKEND": "htcondor"}


def test_plan_refuses_two_inputs_that_would_land_on_one_name(access_point):
    with pytest.raises(WorkflowError, match="same base name 'ckpt-5.pt'"):
        osdf_transfer.plan(
            [
                storage_file(access_point, "osdf:///ospool/ap40/data/jdoe/run0/ckpt-5.pt"),
                storage_file(access_point, "osdf:///ospool/ap40/data/jdoe/run1/ckpt-5.pt"),
            ],
            [],
        )


def publish(access_point, url: str, content: bytes) -> Path:
    obj = access_point.object(url)
    obj.local_path().parent.mkdir(parents=True, exist_ok=True)
    obj.local_path().write_bytes(content)
    obj.store_object()
    return Path(access_point.backend.file_of(obj.path))


def htcondor_drops(origin_file: Path, scratch: Path) -> None:
    """What HTCondor does for an osdf:// input URL: the object (and its sidecar)
    land in the scratch directory under their base names."""
    for file in (origin_file, origin_file.with_name(origin_file.name + ".sha256")):
        shutil.copy2(file, scratch / file.name)


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("_CONDOR_SCRATCH_DIR", str(scratch))
    return scratch


def test_inside_the_job_inputs_come_from_the_sandbox_and_outputs_stay_for_htcondor(
    access_point, sandbox
):
    origin_file = publish(access_point, f"{RUN}/ckpt-4.pt", b"state after chunk 4")
    plan = osdf_transfer.plan(
        [storage_file(access_point, f"{RUN}/ckpt-4.pt")],
        [storage_file(access_point, f"{RUN}/ckpt-5.pt")],
    )
    htcondor_drops(origin_file, sandbox)
    inner = provider(sandbox / ".snakemake/storage/osdf", backend="htcondor")

    checkpoint_in = inner.object(f"{RUN}/ckpt-4.pt")
    assert checkpoint_in.exists()
    checkpoint_in.retrieve_object()
    assert checkpoint_in.local_path().read_bytes() == b"state after chunk 4"

    checkpoint_out = inner.object(f"{RUN}/ckpt-5.pt")
    checkpoint_out.local_path().write_bytes(b"state after chunk 5")
    checkpoint_out.store_object()
    checkpoint_out.cleanup()
    # Snakemake must not delete the local copies either: they are what HTCondor sends
    assert checkpoint_out.keep_local and checkpoint_in.keep_local
    # every file the submit tells HTCondor to send is there, at the listed path
    for name in plan.output_files:
        assert (sandbox / name).is_file(), name
    # and nothing reached the origin from inside the job: HTCondor sends it later
    assert not (access_point.backend.root / RUN.removeprefix("osdf:///") / "ckpt-5.pt").exists()


def test_a_checkpoint_that_arrives_corrupt_fails_the_job_loudly(access_point, sandbox):
    origin_file = publish(access_point, f"{RUN}/ckpt-4.pt", b"state after chunk 4")
    htcondor_drops(origin_file, sandbox)
    (sandbox / "ckpt-4.pt").write_bytes(b"state after chunk ?")
    inner = provider(sandbox / ".snakemake/storage/osdf", backend="htcondor")
    with pytest.raises(CorruptObjectError, match=f"{RUN}/ckpt-4.pt is corrupt.*expected sha256"):
        inner.object(f"{RUN}/ckpt-4.pt").retrieve_object()


def test_an_input_htcondor_did_not_transfer_is_named(sandbox):
    inner = provider(sandbox / ".snakemake/storage/osdf", backend="htcondor")
    checkpoint = inner.object(f"{RUN}/ckpt-4.pt")
    assert not checkpoint.exists()
    with pytest.raises(WorkflowError, match="did not transfer it.*transfer_input_files"):
        checkpoint.retrieve_object()


def run_job_shell(steps: osdf_transfer.InJobSteps, command: str, sandbox: Path, path: str) -> subprocess.CompletedProcess:
    """A direct job's shell as htcannex wraps it: the landing steps, the command, then (if it
    succeeded) the outputs' sidecars; run in the sandbox with `path` as PATH."""
    script = f"{steps.before}{command} && {steps.after}"
    return subprocess.run(["/bin/sh", "-c", script], cwd=sandbox, capture_output=True, text=True,
                          env={**os.environ, "_CONDOR_SCRATCH_DIR": str(sandbox), "PATH": path})


@pytest.mark.parametrize("sha256sum", ["coreutils", "missing"])
def test_a_job_without_snakemake_does_the_providers_part_in_its_shell(access_point, sandbox, sha256sum):
    """in_job_steps: landed inputs at the command's paths, checked; outputs' sidecars written; again
    after a restart in the same sandbox (a self-checkpointing job), with nothing landed anew. Without
    a working sha256sum the provider itself (python -m ...in_job) does the same."""
    origin_file = publish(access_point, f"{RUN}/ckpt-4.pt", b"state after chunk 4")
    htcondor_drops(origin_file, sandbox)
    steps = osdf_transfer.in_job_steps([storage_file(access_point, f"{RUN}/ckpt-4.pt")],
                                       [storage_file(access_point, f"{RUN}/ckpt-5.pt")],
                                       ".snakemake/storage", sys.executable)
    local = Path(".snakemake/storage/osdf") / RUN.removeprefix("osdf:///")
    command = f"mkdir -p {local} && (cat {local}/ckpt-4.pt; echo ' + 5') > {local}/ckpt-5.pt"
    path = os.environ["PATH"]
    if sha256sum == "missing":
        broken = sandbox.parent / "bin"
        broken.mkdir()
        (broken / "sha256sum").write_text("#!/bin/sh\nexit 127\n")
        (broken / "sha256sum").chmod(0o755)
        path = f"{broken}{os.pathsep}{path}"

    for attempt in ("first", "restarted"):
        job = run_job_shell(steps, command, sandbox, path)
        assert job.returncode == 0, (attempt, job.stderr)
        assert not (sandbox / "ckpt-4.pt").exists() and not (sandbox / "ckpt-4.pt.sha256").exists()
        assert (sandbox / local / "ckpt-4.pt.sha256").read_bytes() == origin_file.with_name("ckpt-4.pt.sha256").read_bytes()
        written = sandbox / local / "ckpt-5.pt"
        assert written.read_bytes() == b"state after chunk 4 + 5\n"
        digest = hashlib.sha256(written.read_bytes()).hexdigest()
        assert written.with_name("ckpt-5.pt.sha256").read_text() == f"{digest}  ckpt-5.pt\n"
