"""METL-Global style: proteins of different lengths in one model, padded and masked."""
import numpy as np
import torch

from protein_lm import checkpoint
from protein_lm.data import DataConfig, generate, load_splits
from protein_lm.evaluation import evaluate_checkpoint, predict
from protein_lm.finetuning import finetune
from protein_lm.runtime import configure
from protein_lm.training import Outcome, build_model, train_chunk

from .conftest import TINY_DATA
from .test_finetuning import TINY
from .test_training import EPOCHS, assert_bitwise_equal, job


def several_proteins(tmp_path):
    paths = {name: tmp_path / f"{name}.npz" for name in ("simulated", "experimental")}
    generate(DataConfig(**TINY_DATA | {"synthetic_protein_lengths": [30, 70]}), paths["simulated"], paths["experimental"], tmp_path / "m.json")
    return paths


def test_a_short_protein_predicts_the_same_padded_or_alone(tmp_path, tiny_params):
    """Padding past a shorter protein's end changes nothing: it is masked out of attention and pooling."""
    train = load_splits(several_proteins(tmp_path)["simulated"])["train"]
    model = build_model(tiny_params, train.proteins, 6, configure(1))
    torch.nn.init.normal_(model.head.weight)  # the zero-initialised head would predict 0 either way
    short, long = np.flatnonzero(train.protein == 1)[:3], np.flatnonzero(train.protein == 2)[:1]
    alone = predict(model, train.subset(short), torch.device("cpu"))
    mixed = predict(model, train.subset(np.concatenate([short, long])), torch.device("cpu"))
    assert np.abs(alone).max() > 0.1
    np.testing.assert_allclose(mixed[:3], alone, rtol=1e-4, atol=1e-4)  # float32 sums in another order


def test_pretraining_on_several_proteins_resumes_bitwise_and_fine_tunes(tmp_path, tiny_params):
    data = several_proteins(tmp_path)
    assert train_chunk(job(data, tiny_params, tmp_path, 1, EPOCHS, "unbroken")) is Outcome.FINISHED
    for chunk in (1, 2):
        assert train_chunk(job(data, tiny_params, tmp_path, chunk, EPOCHS // 2, "chunked")) is Outcome.FINISHED
    assert_bitwise_equal(checkpoint.load(tmp_path / "unbroken-1.pt")["model"], checkpoint.load(tmp_path / "chunked-2.pt")["model"])
    assert checkpoint.load(tmp_path / "unbroken-1.pt")["model"]["position"].shape[0] == 238  # the longest protein
    metrics = evaluate_checkpoint(tmp_path / "chunked-2.pt", data["simulated"], 1)
    assert np.isfinite(metrics["val_loss"])
    tuned = finetune(tmp_path / "chunked-2.pt", data["experimental"], TINY, 1)
    assert tuned["n_test"] == 20 and tuned["spearman"] is not None
