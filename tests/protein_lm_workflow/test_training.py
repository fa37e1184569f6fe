"""Chunked pretraining is bitwise the same as training in one go, through evictions too."""
import json
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest
import torch

from protein_lm import checkpoint
from protein_lm.checkpoint import CheckpointError
from protein_lm.training import ChunkJob, Outcome, SelfCheckpoint, train_chunk

from .conftest import WORKFLOW

EPOCHS = 4


def job(data, params, tmp_path: Path, chunk: int, epochs_per_job: int, name: str, every: int = 0, stop: bool = False) -> ChunkJob:
    previous = tmp_path / f"{name}-{chunk - 1}.pt" if chunk > 1 else None
    return ChunkJob(
        run_id="run-a", params=params, data=data["simulated"], chunk=chunk, epochs_per_job=epochs_per_job,
        total_epochs=EPOCHS, previous=previous, output=tmp_path / f"{name}-{chunk}.pt",
        self_checkpoint=SelfCheckpoint(tmp_path / f"self-{name}-{chunk}.pt", every, stop), threads=1,
    )


def weights(path: Path) -> dict:
    return checkpoint.load(path)["model"]


def assert_bitwise_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"tensors differ: {different}"


@pytest.fixture
def unbroken(tiny_data, tiny_params, tmp_path) -> Path:
    assert train_chunk(job(tiny_data, tiny_params, tmp_path, 1, EPOCHS, "unbroken")) is Outcome.FINISHED
    return tmp_path / "unbroken-1.pt"


def test_two_chunks_of_two_epochs_equal_one_chunk_of_four(tiny_data, tiny_params, tmp_path, unbroken):
    for chunk in (1, 2):
        assert train_chunk(job(tiny_data, tiny_params, tmp_path, chunk, 2, "chunked")) is Outcome.FINISHED
    assert_bitwise_equal(weights(unbroken), weights(tmp_path / "chunked-2.pt"))
    one, two = checkpoint.load(unbroken), checkpoint.load(tmp_path / "chunked-2.pt")
    assert [e["train_loss"] for e in one["history"]] == [e["train_loss"] for e in two["history"]]
    assert [e["chunk"] for e in two["history"]] == [1, 1, 2, 2]
    assert one["optimizer"]["state"][0]["step"] == two["optimizer"]["state"][0]["step"]
    # A different seed really trains differently: the equality above is not vacuous.
    train_chunk(job(tiny_data, replace(tiny_params, seed=12), tmp_path, 1, EPOCHS, "other"))
    assert not torch.equal(weights(unbroken)["head.weight"], weights(tmp_path / "other-1.pt")["head.weight"])


def test_self_checkpoint_stops_and_resumes_bitwise(tiny_data, tiny_params, tmp_path, unbroken):
    """HTCondor's path: save every 5 steps and stop (the job exits 85), restart, until done."""
    starts = 0
    while train_chunk(job(tiny_data, tiny_params, tmp_path, 1, EPOCHS, "evicted", every=5, stop=True)) is Outcome.CHECKPOINTED:
        starts += 1
        assert (tmp_path / "self-evicted-1.pt").exists()
    assert starts >= 4  # 24 steps in 4 epochs of 6 steps: stops at 5, 10, 15, 20
    assert_bitwise_equal(weights(unbroken), weights(tmp_path / "evicted-1.pt"))
    state = checkpoint.load(tmp_path / "evicted-1.pt")
    assert len(state["segments"]) == starts + 1
    assert not (tmp_path / "self-evicted-1.pt").exists()  # a finished chunk leaves no resumable file


def test_self_checkpoint_by_minutes_stops_wherever_and_resumes_bitwise(tiny_data, tiny_params, tmp_path, unbroken):
    """A period in minutes (real sites) saves at whatever step the clock says; resuming is still
    bitwise. A period of 0.003 min (0.18 s) stops a few times in this chunk's few seconds."""
    spec = job(tiny_data, tiny_params, tmp_path, 1, EPOCHS, "timed", stop=True)
    spec = replace(spec, self_checkpoint=replace(spec.self_checkpoint, every_minutes=0.003))
    starts = 0
    while train_chunk(spec) is Outcome.CHECKPOINTED:
        starts += 1
    assert starts >= 1
    assert_bitwise_equal(weights(unbroken), weights(tmp_path / "timed-1.pt"))
    assert len(checkpoint.load(tmp_path / "timed-1.pt")["segments"]) == starts + 1


RUN_IN_SUBPROCESS = """
import json, sys
from pathlib import Path
sys.path.insert(0, {scripts!r})
from protein_lm.config import TrainParams
from protein_lm.training import ChunkJob, SelfCheckpoint, train_chunk
spec = json.loads(sys.argv[1])
train_chunk(ChunkJob(run_id="run-a", params=TrainParams.from_dict(spec["params"]), data=Path(spec["data"]), chunk=1,
    epochs_per_job={epochs}, total_epochs={epochs}, previous=None, output=Path(spec["output"]),
    self_checkpoint=SelfCheckpoint(Path(spec["self"]), 2, False), threads=1))
"""


def test_killed_mid_chunk_resumes_from_self_checkpoint_bitwise(tiny_data, tiny_params, tmp_path, unbroken):
    """A real eviction: SIGKILL while training (after a self-checkpoint), then run the chunk again."""
    target = job(tiny_data, tiny_params, tmp_path, 1, EPOCHS, "killed", every=2)
    spec = {"params": asdict(tiny_params), "data": str(tiny_data["simulated"]), "output": str(target.output),
            "self": str(target.self_checkpoint.path)}
    code = RUN_IN_SUBPROCESS.format(scripts=str(WORKFLOW / "scripts"), epochs=EPOCHS)
    process = subprocess.Popen([sys.executable, "-c", code, json.dumps(spec)])
    try:
        deadline = time.time() + 120
        while True:
            assert process.poll() is None, "training ended before it could be killed"
            assert time.time() < deadline, "no self-checkpoint appeared"
            if Path(str(target.self_checkpoint.path) + ".sha256").exists():
                process.send_signal(signal.SIGSTOP)  # freeze it, then kill only between two saves
                try:
                    state = checkpoint.load(target.self_checkpoint.path)
                except CheckpointError:
                    process.send_signal(signal.SIGCONT)
                    continue
                process.kill()
                break
            time.sleep(0.005)
    finally:
        process.kill()
        process.wait()
    assert not target.output.exists()
    assert state["position"]["epoch"] * 6 + state["position"]["step"] < EPOCHS * 6  # killed mid-chunk
    assert train_chunk(target) is Outcome.FINISHED
    assert_bitwise_equal(weights(unbroken), weights(target.output))


def test_corrupt_checkpoint_fails_loudly_instead_of_restarting(tiny_data, tiny_params, tmp_path):
    train_chunk(job(tiny_data, tiny_params, tmp_path, 1, 2, "c"))
    path = tmp_path / "c-1.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"c-1\.pt.*corrupt"):
        train_chunk(job(tiny_data, tiny_params, tmp_path, 2, 2, "c"))
    assert not (tmp_path / "c-2.pt").exists()


def test_checkpoint_of_another_run_or_config_is_refused(tiny_data, tiny_params, tmp_path):
    train_chunk(job(tiny_data, tiny_params, tmp_path, 1, 2, "x"))
    with pytest.raises(CheckpointError, match="belongs to run run-a chunk 1, not run run-b"):
        train_chunk(replace(job(tiny_data, tiny_params, tmp_path, 2, 2, "x"), run_id="run-b"))
    with pytest.raises(CheckpointError, match="other parameters"):
        train_chunk(job(tiny_data, replace(tiny_params, lr=0.01), tmp_path, 2, 2, "x"))
