"""The job's side, for real: Snakemake in remote mode (as htcannex starts it on the
execute point) in a directory laid out the way HTCondor leaves a sandbox after the
URL transfers of ``osdf_transfer.plan``."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKFLOWS = Path(__file__).parent / "workflows"
RUN0 = "ospool/ap40/data/jdoe/protein_lm/run0"

pytestmark = pytest.mark.slow


def sandbox_with_checkpoint(tmp_path: Path, content: bytes, recorded: bytes) -> Path:
    """A scratch dir holding the Snakefile and checkpoint 1 with a sidecar for `recorded`."""
    sandbox = tmp_path / "scratch"
    sandbox.mkdir()
    (sandbox / "Snakefile").write_text((WORKFLOWS / "hops.smk").read_text())
    (sandbox / "ckpt-1.pt").write_bytes(content)
    digest = hashlib.sha256(recorded).hexdigest()
    (sandbox / "ckpt-1.pt.sha256").write_text(f"{digest}  ckpt-1.pt\n")
    return sandbox


def run_chunk_2(sandbox: Path) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "_CONDOR_SCRATCH_DIR": str(sandbox),
        "SNAKEMAKE_STORAGE_OSDF_BACKEND": "htcondor",
    }
    return subprocess.run(
        [
            sys.executable, "-m", "snakemake", "--snakefile", "Snakefile",
            "--target-jobs", "train_chunk:run=0,chunk=2", "--allowed-rules", "train_chunk",
            "--cores", "1", "--force", "--target-files-omit-workdir-adjustment",
            "--nocolor", "--nolock", "--shared-fs-usage", "none",
            "--directory", ".", "--mode", "remote",
        ],
        cwd=sandbox, env=environment, capture_output=True, text=True, timeout=120,
    )


def test_the_job_resumes_from_the_transferred_checkpoint_and_leaves_its_own(tmp_path):
    sandbox = sandbox_with_checkpoint(tmp_path, b"chunk 1\n", recorded=b"chunk 1\n")
    run = run_chunk_2(sandbox)
    assert run.returncode == 0, run.stderr
    written = sandbox / ".snakemake/storage/osdf" / RUN0 / "ckpt-2.pt"
    assert written.read_text() == "chunk 1\nchunk 2\n"
    # the sidecar HTCondor sends along with it
    sidecar = written.with_name("ckpt-2.pt.sha256").read_text()
    digest = hashlib.sha256(b"chunk 1\nchunk 2\n").hexdigest()
    assert sidecar == f"{digest}  ckpt-2.pt\n"


def test_a_checkpoint_corrupted_on_the_way_fails_the_job_before_training(tmp_path):
    sandbox = sandbox_with_checkpoint(tmp_path, b"chunk ?\n", recorded=b"chunk 1\n")
    run = run_chunk_2(sandbox)
    assert run.returncode != 0
    assert f"osdf:///{RUN0}/ckpt-1.pt is corrupt or truncated" in run.stderr
    assert hashlib.sha256(b"chunk 1\n").hexdigest() in run.stderr  # expected
    assert hashlib.sha256(b"chunk ?\n").hexdigest() in run.stderr  # got
    assert not (sandbox / ".snakemake/storage/osdf" / RUN0 / "ckpt-2.pt").exists()
