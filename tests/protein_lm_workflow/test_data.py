"""The SYNTHETIC data set: reproducible, labelled, valid variants of avGFP."""
import json

import numpy as np
import pytest

from protein_lm.data import SCORE_TERMS, DataConfig, generate, load_splits
from protein_lm.sequence import AA_INDEX, AVGFP, VariantError, parse_variant

from .conftest import TINY_DATA


def test_same_seed_same_files(tmp_path, tiny_data):
    again = [tmp_path / n for n in ("s.tsv", "e.tsv", "m.json")]
    generate(DataConfig(**TINY_DATA), *again)
    assert again[0].read_bytes() == tiny_data["simulated"].read_bytes()
    assert again[1].read_bytes() == tiny_data["experimental"].read_bytes()


def test_labelled_synthetic_and_about_avgfp(tiny_data):
    meta = json.loads(tiny_data["metadata"].read_text())
    assert meta["SYNTHETIC"] is True and meta["wild_type"] == {"name": "avGFP", "uniprot": "P42212", "length": 238}
    assert AVGFP[64:67] == "SYG"  # the chromophore, Ser65-Tyr66-Gly67


def test_splits_and_terms_learnable_shape(tiny_data):
    sim = load_splits(tiny_data["simulated"], SCORE_TERMS)
    assert set(sim) == {"train", "val"} and len(sim["val"].tokens) == 24
    assert sim["train"].targets.shape == (96, len(SCORE_TERMS))
    assert np.allclose(sim["train"].targets.mean(axis=0), 0, atol=1e-5)  # z-scored on train
    exp = load_splits(tiny_data["experimental"], ("score",))
    assert set(exp) == {"train", "test"} and len(exp["test"].tokens) == 20
    # every variant differs from the wild type, in at most max_mutations of the library's sites
    wild_type = np.array([AA_INDEX[aa] for aa in AVGFP])
    changed = np.concatenate([sim["train"].tokens, sim["val"].tokens]) != wild_type
    assert 1 <= changed.sum(axis=1).min() and changed.sum(axis=1).max() <= TINY_DATA["max_mutations"]
    assert changed.any(axis=0).sum() <= TINY_DATA["library_sites"]


def test_bad_variant_names_the_mutation():
    assert parse_variant("S65T,Y66H") == [(64, "T"), (65, "H")]
    with pytest.raises(VariantError, match="'A65T' does not match the wild type at position 65"):
        parse_variant("A65T")
    with pytest.raises(VariantError, match="'S65' is not of the form"):
        parse_variant("S65")


def test_a_hidden_landscape_takes_its_share_of_the_experimental_target(tmp_path):
    """hidden_fraction h: the target correlates with the simulated terms' readout at about sqrt(1 - h)
    (before noise); the simulated scores do not change."""
    def made(h: float, name: str):
        paths = [tmp_path / f"{name}-{n}" for n in ("s.tsv", "e.tsv", "m.json")]
        generate(DataConfig(**(TINY_DATA | {"n_experimental": 400, "experimental_noise": 0.0, "hidden_fraction": h})), *paths)
        return paths[0].read_bytes(), load_splits(paths[1], ("score",), standardize_on="train")
    simulated, plain = made(0.0, "plain")
    same_simulated, mixed = made(0.75, "mixed")
    assert simulated == same_simulated
    r = np.corrcoef(np.concatenate([s.targets[:, 0] for s in plain.values()]),
                    np.concatenate([s.targets[:, 0] for s in mixed.values()]))[0, 1]
    assert 0.35 < r < 0.65  # sqrt(1 - 0.75) = 0.5, from 400 variants
