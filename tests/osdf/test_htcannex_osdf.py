"""Checkpoints hop through OSDF with the htcannex executor and the embedded pool: the
access point (the snakemake working directory) never holds a checkpoint; the pool's
URL transfers move them between its origin and the job sandboxes."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parent.parent
BIN = Path(sys.executable).parent
RUN0 = Path("ospool/ap40/data/jdoe/protein_lm/run0")

pytestmark = pytest.mark.slow


def test_the_submit_directory_never_holds_a_checkpoint(tmp_path, embedded_pool):
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "Snakefile").write_text((HERE / "workflows/hops.smk").read_text())
    origin = embedded_pool.origin_dir
    origin.mkdir(parents=True, exist_ok=True)
    environment = {
        **os.environ,
        "HTCANNEX_POOL_DIR": str(embedded_pool.spool_dir),
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    }
    result = subprocess.run(
        [
            "snakemake", "--executor", "htcannex", "--profile", str(REPO / "profiles/local"),
            "--storage-osdf-backend", "local", "--storage-osdf-local-origin", str(origin),
        ],
        cwd=workdir, env=environment, capture_output=True, text=True, timeout=400,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]

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
