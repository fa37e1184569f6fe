"""The SYNTHETIC data set: reproducible, labelled, valid variants of avGFP (and, METL-Global style,
of more SYNTHETIC proteins of other lengths), in binary columns."""
import json

import numpy as np
import pytest

from protein_lm.config import ConfigError
from protein_lm.data import SCORE_TERMS, DataConfig, DataError, generate, load_splits
from protein_lm.sequence import AVGFP, encode

from .conftest import TINY_DATA


def columns(path):
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def test_same_seed_same_data(tmp_path, tiny_data):
    again = [tmp_path / n for n in ("s.npz", "e.npz", "m.json")]
    generate(DataConfig(**TINY_DATA), *again)
    for new, old in ((again[0], tiny_data["simulated"]), (again[1], tiny_data["experimental"])):
        first, second = columns(new), columns(old)
        assert first.keys() == second.keys() and all(np.array_equal(first[k], second[k]) for k in first)


def test_labelled_synthetic_and_about_avgfp(tiny_data):
    meta = json.loads(tiny_data["metadata"].read_text())
    assert meta["SYNTHETIC"] is True and meta["wild_type"] == {"name": "avGFP", "uniprot": "P42212", "length": 238}
    assert meta["other_proteins"] == []
    assert AVGFP[64:67] == "SYG"  # the chromophore, Ser65-Tyr66-Gly67


def test_splits_and_terms_learnable_shape(tiny_data):
    sim = load_splits(tiny_data["simulated"])
    assert set(sim) == {"train", "val"} and len(sim["val"]) == 24
    assert sim["train"].targets.shape == (96, len(SCORE_TERMS))
    assert np.allclose(sim["train"].targets.mean(axis=0), 0, atol=1e-5)  # z-scored on train
    exp = load_splits(tiny_data["experimental"])
    assert set(exp) == {"train", "test"} and len(exp["test"]) == 20
    # every variant differs from the wild type, in at most max_mutations of the library's sites
    tokens = np.concatenate([sim["train"].batch()[0], sim["val"].batch()[0]])
    changed = tokens != encode(AVGFP)
    assert 1 <= changed.sum(axis=1).min() and changed.sum(axis=1).max() <= TINY_DATA["max_mutations"]
    assert changed.any(axis=0).sum() <= TINY_DATA["library_sites"]


def test_a_file_that_is_not_data_names_itself_and_the_fix(tmp_path):
    text = tmp_path / "SYNTHETIC_simulated_scores.tsv"
    text.write_text("variant\tsplit\nS65T\ttrain\n")
    with pytest.raises(DataError, match=f"{text}: not a protein_lm data file .*regenerate it with the make_data rule"):
        load_splits(text)


def test_more_proteins_of_other_lengths(tmp_path, tiny_data):
    """synthetic_protein_lengths adds SYNTHETIC proteins, each with its own library, z-scored on its
    own training split; avGFP's variants and the experimental set stay as they were; a batch is as
    long as its longest sequence."""
    paths = [tmp_path / n for n in ("s.npz", "e.npz", "m.json")]
    generate(DataConfig(**TINY_DATA | {"synthetic_protein_lengths": [40, 60]}), *paths)
    meta = json.loads(paths[2].read_text())
    assert [(p["name"], p["length"], p["SYNTHETIC"]) for p in meta["other_proteins"]] == [("SYN1", 40, True), ("SYN2", 60, True)]
    sim = load_splits(paths[0])
    train = sim["train"]
    assert train.proteins.names == ("avGFP", "SYN1", "SYN2") and list(train.proteins.lengths) == [238, 40, 60]
    assert train.proteins.sequences[1] == meta["other_proteins"][0]["sequence"]
    assert np.bincount(np.concatenate([s.protein for s in sim.values()])).tolist() == [120, 120, 120]
    for index in range(3):
        assert np.allclose(train.targets[train.protein == index].mean(axis=0), 0, atol=1e-5)
    plain = load_splits(tiny_data["simulated"])["train"]
    avgfp = train.subset(train.protein == 0)
    assert np.array_equal(avgfp.batch()[0], plain.batch()[0]) and np.allclose(avgfp.targets, plain.targets, atol=1e-6)
    assert columns(paths[1])["protein"].tolist() == columns(tiny_data["experimental"])["protein"].tolist()
    short = np.flatnonzero(train.protein == 1)[:2]
    tokens, protein = train.batch(short)
    assert tokens.shape == (2, 40) and protein.tolist() == [1, 1]
    tokens, protein = train.batch(np.concatenate([short, np.flatnonzero(train.protein == 2)[:1]]))
    assert tokens.shape == (3, 60) and (tokens[:2, 40:] == 0).all()
    assert ((tokens[:2, :40] != encode(train.proteins.sequences[1])).sum(axis=1) >= 1).all()


def test_a_protein_shorter_than_the_library_names_the_keys(tmp_path):
    with pytest.raises(ConfigError, match=r"data.synthetic_protein_lengths \[8\] are shorter than data.library_sites 10"):
        generate(DataConfig(**TINY_DATA | {"synthetic_protein_lengths": [8]}), *(tmp_path / n for n in ("s.npz", "e.npz", "m.json")))


def test_a_hidden_landscape_takes_its_share_of_the_experimental_target(tmp_path):
    """hidden_fraction h: the target correlates with the simulated terms' readout at about sqrt(1 - h)
    (before noise); the simulated scores do not change."""
    def made(h: float, name: str):
        paths = [tmp_path / f"{name}-{n}" for n in ("s.npz", "e.npz", "m.json")]
        generate(DataConfig(**(TINY_DATA | {"n_experimental": 400, "experimental_noise": 0.0, "hidden_fraction": h})), *paths)
        return columns(paths[0])["targets"], load_splits(paths[1], standardize_on="train")
    simulated, plain = made(0.0, "plain")
    same_simulated, mixed = made(0.75, "mixed")
    assert np.array_equal(simulated, same_simulated)
    r = np.corrcoef(np.concatenate([s.targets[:, 0] for s in plain.values()]),
                    np.concatenate([s.targets[:, 0] for s in mixed.values()]))[0, 1]
    assert 0.35 < r < 0.65  # sqrt(1 - 0.75) = 0.5, from 400 variants
