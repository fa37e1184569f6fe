"""Checkpoints hop through OSDF with the htcannex executor and the embedded pool: the
access point (the snakemake working directory) never holds a checkpoint; the pool's
URL transfers move them between its origin and the job sandboxes, and the jobs run their
command without Snakemake (direct_command.py), checking what lands against its sidecar."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parent.parent
BIN = Path(sys.executable).parent
RUN0 = Path("ospool/ap40/data/jdoe/protein_lm/run0")

pytestmark = pytest.mark.slow


def run_htcannex(workdir: Path, pool, *extra: str, origin: Path | None = None) -> subprocess.CompletedProcess:
    """The hops workflow on `pool`; the access point looks at `origin` (default: the pool's, which
    the jobs' URL transfers use)."""
    environment = {
        **os.environ,
        "HTCANNEX_POOL_DIR": str(pool.spool_dir),
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    }
    return subprocess.run(
        [
            "snakemake", "--executor", "htcannex", "--profile", str(REPO / "profiles/local"),
            "--storage-osdf-backend", "local", "--storage-osdf-local-origin", str(origin or pool.origin_dir),
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


def chunk_jobs(pool) -> list[tuple[int, str]]:
    """(chunk, Arguments) of every job the pool ran, in chunk order."""
    ads = pool.schedd().history("true", ["HtcannexWildcards", "Arguments"])
    return sorted((int(json.loads(ad["HtcannexWildcards"])["chunk"]), str(ad["Arguments"])) for ad in ads)


def chunks_submitted(pool) -> list[int]:
    return [chunk for chunk, _ in chunk_jobs(pool)]


def ran_snakemake(arguments: str) -> bool:
    """Whether a job's command was Snakemake's (`python -m snakemake ... --target-jobs ...`)."""
    return "--target-jobs" in arguments


def jobs_stderr(workdir: Path) -> str:
    """What the jobs wrote on stderr (htcannex keeps each job's in .htcannex/logs)."""
    return "".join(path.read_text() for path in (workdir / ".htcannex" / "logs").glob("*.err"))


def test_the_submit_directory_never_holds_a_checkpoint(workdir, embedded_pool):
    result = run_htcannex(workdir, embedded_pool)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]

    origin = embedded_pool.origin_dir
    assert (origin / RUN0 / "ckpt-3.pt").read_text() == "chunk 1\nchunk 2\nchunk 3\n"
    for chunk in (1, 2, 3):
        # in sha256sum's format, of the bytes that arrived
        digest = hashlib.sha256((origin / RUN0 / f"ckpt-{chunk}.pt").read_bytes()).hexdigest()
        assert (origin / RUN0 / f"ckpt-{chunk}.pt.sha256").read_text() == f"{digest}  ckpt-{chunk}.pt\n"
    # Each job ran the rule's command alone: its only storage files are OSDF objects.
    jobs = chunk_jobs(embedded_pool)
    assert [chunk for chunk, _ in jobs] == [1, 2, 3]
    assert not any(ran_snakemake(arguments) for _, arguments in jobs), jobs
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


def test_a_checkpoint_corrupt_on_its_way_to_the_job_fails_that_job_before_its_command(workdir, embedded_pool, tmp_path):
    """The access point's origin holds the good checkpoint 2, the one the jobs' transfers read from
    a corrupt one (as a cache could serve it, or the federation, whose objects the access point does
    not hash): the chunk-3 job stops on its sidecar, with the object and both checksums named."""
    first = run_htcannex(workdir, embedded_pool, "--config", "chunks=2")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-6000:]
    good = tmp_path / "access-point-origin"
    shutil.copytree(embedded_pool.origin_dir, good)
    damaged = embedded_pool.origin_dir / RUN0 / "ckpt-2.pt"
    damaged.write_bytes(damaged.read_bytes().replace(b"chunk 2", b"chunk ?"))

    second = run_htcannex(workdir, embedded_pool, "--config", "chunks=3", "--retries", "0", origin=good)

    assert second.returncode != 0
    assert f"osdf:///{RUN0}/ckpt-2.pt is corrupt or truncated" in second.stderr, second.stderr[-6000:]
    assert hashlib.sha256(b"chunk 1\nchunk 2\n").hexdigest() in second.stderr  # expected
    assert hashlib.sha256(b"chunk 1\nchunk ?\n").hexdigest() in second.stderr  # got
    # The command never ran (it says so on stderr), so nothing was written; the job had no Snakemake.
    assert "is corrupt or truncated" in jobs_stderr(workdir) and "chunk 3 runs" not in jobs_stderr(workdir)
    assert not (embedded_pool.origin_dir / RUN0 / "ckpt-3.pt").exists()
    (chunk_3,) = [arguments for chunk, arguments in chunk_jobs(embedded_pool) if chunk == 3]
    assert not ran_snakemake(chunk_3)


def test_a_job_whose_storage_prefix_differs_keeps_its_snakemake(workdir, embedded_pool):
    """With --remote-job-local-storage-prefix set apart, the command's paths are not the job's:
    Snakemake runs in the job and maps them, and the chain still hands its checkpoints on."""
    result = run_htcannex(workdir, embedded_pool, "--config", "chunks=2",
                          "--remote-job-local-storage-prefix", ".storage-in-job")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    assert (embedded_pool.origin_dir / RUN0 / "ckpt-2.pt").read_text() == "chunk 1\nchunk 2\n"
    assert all(ran_snakemake(arguments) for _, arguments in chunk_jobs(embedded_pool))
