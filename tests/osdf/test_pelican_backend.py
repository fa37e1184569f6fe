"""The ``pelican`` backend against a miniature federation on 127.0.0.1 (discovery,
director, cache/origin with WebDAV PROPFIND and PUT), through the snakemake CLI."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fake_federation import FakeFederation, make_certificate

WORKFLOWS = Path(__file__).parent / "workflows"
RUN0 = Path("ospool/ap40/data/jdoe/protein_lm/run0")
TOKEN = "tok-8c1f4e2a-never-print-me"

pytestmark = pytest.mark.slow


@pytest.fixture
def federation(tmp_path):
    cert, key = make_certificate(tmp_path)
    origin = tmp_path / "federation-origin"
    origin.mkdir()
    running = FakeFederation(origin, TOKEN, cert, key).start()
    yield running
    running.stop()


def snakemake(tmp_path, federation, token: str, *extra: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        # the client trusts the throw-away certificate, and nothing else
        "SSL_CERT_FILE": str(federation.cert),
        "BEARER_TOKEN": token,
    }
    return subprocess.run(
        [
            sys.executable, "-m", "snakemake",
            "-s", str(WORKFLOWS / "chain.smk"),
            "-d", str(tmp_path / "work"),
            "--cores", "1",
            "--storage-osdf-backend", "pelican",
            "--storage-osdf-federation", federation.discovery_url,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )


def test_chunks_hand_off_through_the_federation_with_the_token(tmp_path, federation):
    run = snakemake(tmp_path, federation, TOKEN)
    assert run.returncode == 0, run.stderr
    run0 = federation.origin / RUN0
    assert (run0 / "ckpt-3.pt").read_text() == "chunk 1\nchunk 2\nchunk 3\n"
    for chunk in (1, 2, 3):
        assert (run0 / f"ckpt-{chunk}.pt.sha256").exists()
    methods = {method for method, _ in federation.requests}
    assert {"PUT", "GET", "PROPFIND"} <= methods
    # every object was written once: immutability holds on the way in, too
    puts = [path for method, path in federation.requests if method == "PUT"]
    assert len(puts) == len(set(puts)) == 6
    assert TOKEN not in run.stdout + run.stderr


def test_a_refused_token_fails_the_run_without_showing_the_token(tmp_path, federation):
    wrong = "tok-wrong-5d3b-also-secret"
    run = snakemake(tmp_path, federation, wrong)
    assert run.returncode != 0
    # the error names the object and what to check
    assert f"osdf:///{RUN0}/ckpt-3.pt" in run.stderr and "check the token" in run.stderr
    assert wrong not in run.stdout + run.stderr
    log_dir = tmp_path / "work/.snakemake/log"
    for log in log_dir.glob("*.log"):
        assert wrong not in log.read_text()


def test_rerunning_a_chunk_cannot_replace_its_published_checkpoint(tmp_path, federation):
    assert snakemake(tmp_path, federation, TOKEN).returncode == 0
    published = (federation.origin / RUN0 / "ckpt-3.pt").read_bytes()

    forced = snakemake(tmp_path, federation, TOKEN, "--forcerun", "train_chunk")

    assert forced.returncode != 0
    assert f"Cannot remove osdf:///{RUN0}/" in forced.stderr
    assert "immutable" in forced.stderr and "new name" in forced.stderr
    assert (federation.origin / RUN0 / "ckpt-3.pt").read_bytes() == published
