"""Checkpoints hop through OSDF with the htcannex executor and the embedded pool: the
access point (the snakemake working directory) never holds a checkpoint; the pool's
URL transfers move them between its origin and the job sandboxes."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parent.parent
BIN = Path(sys.executable).parent
RUN0 = Path("ospool/ap40/data/jdoe/protein_lm/run0")
CHUNK_TARGET = re.compile(r"--target-jobs ''train_chunk:run=0,chunk=(\d+)''")

pytestmark = pytest.mark.slow


def run_htcannex(workdir: Path, pool, *extra: str) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "HTCANNEX_POOL_DIR": str(pool.spool_dir),
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    }
    return subprocess.run(
        [
            "snakemake", "--executor", "htcannex", "--profile", str(REPO / "profiles/local"),
            "--storage-osdf-backend", "local", "--storage-osdf-local-origin", str(pool.origin_dir),
            *extra,
        ],
        cwd=workdir, env=environment, capture_output=True, text=True, timeout=400,
    )


@pytest.fixture
def workdir(tmp_path, embedded_pool):
    work = tmp_path / "work"
    work.mkdir()
    (work / "Snakefile").write_text((HERE / "workflows/hops.smk").read_text())
    embedded_pool.origin_dir.mkdir(parents=True, exist_ok=True)
    return work


def chunks_submitted(pool) -> list[int]:
    return sorted(
        int(match.group(1))
        for ad in pool.schedd().history("true", ["Arguments"])
        if (match := CHUNK_TARGET.search(str(ad.get("Arguments", ""))))
    )


def test_the_submit_directory_never_holds_a_checkpoint(workdir, embedded_pool):
    result = run_htcannex(workdir, embedded_pool)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]

    origin = embedded_pool.origin_dir
    assert (origin / RUN0 / "ckpt-3.pt").read_text() == "chunk 1\nchunk 2\nchunk 3\n"
    for chunk in (1, 2, 3):
        assert (origin / RUN0 / f"ckpt-{chunk}.pt.sha256").is_file()
    held_at_access_point = [p for p in workdir.rglob("ckpt-*") if p.is_file()]
    assert held_at_access_point == []
    # HTCondor moved them: the chunks' submits name the objects as URLs
    transfers = [
        str(ad.get("TransferInput", "")) + " " + str(ad.get("TransferOutputRemaps", ""))
        for ad in embedded_pool.schedd().history("true", ["TransferInput", "TransferOutputRemaps"])
    ]
    assert sum(f"osdf:///{RUN0}/ckpt-2.pt" in t for t in transfers) == 2  # out of chunk 2, into chunk 3


def test_a_corrupt_checkpoint_in_the_origin_reruns_only_its_chunk(workdir, embedded_pool):
    first = run_htcannex(workdir, embedded_pool, "--config", "chunks=2")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-6000:]
    damaged = embedded_pool.origin_dir / RUN0 / "ckpt-2.pt"
    damaged.write_bytes(damaged.read_bytes().replace(b"chunk 2", b"chunk ?"))

    second = run_htcannex(workdir, embedded_pool, "--config", "chunks=3")

    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-6000:]
    assert f"osdf:///{RUN0}/ckpt-2.pt is corrupt" in second.stderr
    # chunk 1 ran once: training resumed from its checkpoint, not from scratch
    assert chunks_submitted(embedded_pool) == [1, 2, 2, 3]
    assert (embedded_pool.origin_dir / RUN0 / "ckpt-3.pt").read_text() == "chunk 1\nchunk 2\nchunk 3\n"
