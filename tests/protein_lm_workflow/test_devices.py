"""GPU-safe resume, checked on a CPU-only machine.

What these tests prove, and what not: a checkpoint whose every storage is tagged "cuda:0" (as
torch.save writes a GPU run's tensors) is built by making torch's serializer tag CPU tensors so;
a plain torch.load of it fails here exactly as on a CPU-only site, and the next chunk resumes
from it through the workflow's loader. Whether a real GPU's tensors (the CUDA RNG state bytes,
bf16 numerics) behave the same is not shown without a GPU.
"""
import pytest
import torch

from protein_lm import checkpoint
from protein_lm.runtime import cpu_model
from protein_lm.training import Outcome, train_chunk

from .test_training import job


def tagged_cuda(monkeypatch):
    """torch.save writes every storage as if it lived on the first GPU."""
    monkeypatch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")


def test_checkpoint_written_on_a_gpu_resumes_on_a_cpu_only_site(tiny_data, tiny_params, tmp_path, monkeypatch):
    assert train_chunk(job(tiny_data, tiny_params, tmp_path, 1, 2, "gpu")) is Outcome.FINISHED
    state = checkpoint.load(tmp_path / "gpu-1.pt")
    state["rng"]["cuda"] = [torch.zeros(16, dtype=torch.uint8), torch.ones(16, dtype=torch.uint8)]  # two GPUs' RNGs
    with monkeypatch.context() as patch:
        tagged_cuda(patch)
        checkpoint.save(state, tmp_path / "gpu-1.pt")
    assert not torch.cuda.is_available()
    with pytest.raises(RuntimeError, match="CUDA"):
        torch.load(tmp_path / "gpu-1.pt", weights_only=True)  # what checkpoint.load did before

    assert train_chunk(job(tiny_data, tiny_params, tmp_path, 2, 2, "gpu")) is Outcome.FINISHED
    resumed = checkpoint.load(tmp_path / "gpu-2.pt")
    assert [e["epoch"] for e in resumed["history"]] == [1, 2, 3, 4]
    assert {(e["device"].split()[0], e["precision"]) for e in resumed["history"]} == {("cpu", "fp32")}
    assert all(t.device.type == "cpu" for t in resumed["model"].values())


def test_each_epoch_records_where_and_how_it_trained(tiny_data, tiny_params, tmp_path, monkeypatch):
    """Outside HTCondor: the site falls back to 'local' and no job is claimed."""
    for name in ("HTCANNEX_SITE", "_CONDOR_MACHINE_AD", "_CONDOR_JOB_AD"):
        monkeypatch.delenv(name, raising=False)
    train_chunk(job(tiny_data, tiny_params, tmp_path, 1, 1, "where"))
    (epoch,) = checkpoint.load(tmp_path / "where-1.pt")["history"]
    assert (epoch["site"], epoch["slot"], epoch["job"], epoch["planned_site"]) == ("local", None, None, None)
    assert (epoch["device"], epoch["precision"], epoch["torch"]) == (f"cpu ({cpu_model()})", "fp32", torch.__version__)
