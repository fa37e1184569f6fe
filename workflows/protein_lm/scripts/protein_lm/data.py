"""SYNTHETIC stand-ins for METL's data: simulated biophysical scores and a small experimental set.

METL pretrains on Rosetta energy terms computed for millions of variants, then fine-tunes on a
few hundred experimental measurements. Nothing here is measured or computed by Rosetta: a
seeded random "landscape" over avGFP gives each score term structure a model can learn:
per-site additive effects (sites differ in sensitivity, terms share latent factors, as Rosetta
terms correlate), pairwise epistasis between sampled residue pairs, and noise. The
"experimental" target is a nonlinear function of a few terms plus more noise and, with
`hidden_fraction` > 0, a hidden landscape no simulated term sees: the sim-to-real mismatch of
real assays, where Rosetta's terms explain only part of what is measured.
"""

import csv
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .sequence import AA_INDEX, AMINO_ACIDS, AVGFP, encode_variants, format_variant

# Names borrowed from Rosetta's ref2015 energy terms; the values are synthetic.
SCORE_TERMS = ("fa_atr", "fa_rep", "fa_sol", "fa_elec", "hbond_sc", "rama_prepro")
LATENT_FACTORS = 3
MIN_PAIR_SEPARATION = 3


@dataclass(frozen=True)
class DataConfig:
    seed: int
    n_variants: int
    n_experimental: int
    max_mutations: int
    library_sites: int
    epistatic_pairs: int
    noise: float
    experimental_noise: float
    epistasis_scale: float     # SD of a pair effect, in units of the additive effects' SD
    hidden_fraction: float     # share of the experimental target's variance no simulated term sees
    val_fraction: float
    experimental_test_fraction: float


@dataclass(frozen=True)
class Landscape:
    additive: np.ndarray        # terms x length x 20
    pairs: np.ndarray           # n_pairs x 2 (0-based positions)
    pair_effects: np.ndarray    # n_pairs x 20 x 20
    pair_loadings: np.ndarray   # terms x n_pairs


def make_landscape(rng: np.random.Generator, wild_type: str, sites: np.ndarray, n_pairs: int, epistasis_scale: float,
                   n_terms: int = len(SCORE_TERMS)) -> Landscape:
    length = len(wild_type)
    # Each latent factor is a site profile (buried sites matter more than exposed ones) times
    # an amino-acid property scale (as hydrophobicity or volume); terms mix the factors, so
    # they correlate as Rosetta's terms do. A small site-by-residue residual keeps it rough.
    sensitivity = rng.beta(0.5, 2.0, size=length)
    site_profiles = rng.normal(size=(LATENT_FACTORS, length)) * sensitivity
    residue_scales = rng.normal(size=(LATENT_FACTORS, len(AMINO_ACIDS)))
    loadings = rng.normal(size=(n_terms, LATENT_FACTORS))
    additive = np.einsum("tf,fl,fa->tla", loadings, site_profiles, residue_scales)
    additive += 0.1 * additive.std() * rng.normal(size=additive.shape)
    additive[:, np.arange(length), [AA_INDEX[aa] for aa in wild_type]] = 0.0  # wild type scores 0

    # Epistasis between library sites, as between residues in contact across the barrel.
    candidates = [(int(i), int(j)) for i in sites for j in sites if j - i >= MIN_PAIR_SEPARATION]
    if n_pairs > len(candidates):
        raise ValueError(f"data.epistatic_pairs {n_pairs} exceeds the {len(candidates)} pairs of library sites; lower it or raise data.library_sites")
    pairs = np.array(candidates, dtype=np.int64)[np.sort(rng.choice(len(candidates), size=n_pairs, replace=False))].reshape(-1, 2)
    pair_effects = rng.normal(scale=epistasis_scale * additive.std(), size=(len(pairs), len(AMINO_ACIDS), len(AMINO_ACIDS)))
    pair_loadings = rng.normal(size=(n_terms, len(pairs)))
    return Landscape(additive, pairs, pair_effects, pair_loadings)


def sample_variants(rng: np.random.Generator, wild_type: str, sites: np.ndarray, n: int, max_mutations: int) -> list[str]:
    """Distinct variants with 1..max_mutations substitutions at the library's sites, fewer
    mutations more likely."""
    weights = 1.0 / np.arange(1, max_mutations + 1)
    variants: dict[str, None] = {}
    while len(variants) < n:
        k = int(rng.choice(np.arange(1, max_mutations + 1), p=weights / weights.sum()))
        positions = rng.choice(sites, size=k, replace=False)
        mutations = []
        for pos in positions:
            choices = [aa for aa in AMINO_ACIDS if aa != wild_type[pos]]
            mutations.append((int(pos), str(rng.choice(choices))))
        variants[format_variant(mutations, wild_type)] = None
    return list(variants)


def score_variants(landscape: Landscape, tokens: np.ndarray, wild_type: str) -> np.ndarray:
    """Noise-free score terms (n_variants x terms) for encoded variants."""
    length = len(wild_type)
    scores = landscape.additive[:, np.arange(length)[None, :], tokens].sum(axis=2).T
    wt = np.array([AA_INDEX[aa] for aa in wild_type])
    i, j = landscape.pairs[:, 0], landscape.pairs[:, 1]
    both_mutated = (tokens[:, i] != wt[i]) & (tokens[:, j] != wt[j])  # variants x pairs
    pair_values = landscape.pair_effects[np.arange(len(i))[None, :], tokens[:, i], tokens[:, j]]
    scores += (both_mutated * pair_values) @ landscape.pair_loadings.T
    return scores


def standardise(values: np.ndarray) -> np.ndarray:
    return (values - values.mean(axis=0)) / values.std(axis=0)


def experimental_target(scores: np.ndarray, hidden: np.ndarray, hidden_fraction: float) -> np.ndarray:
    """A nonlinear readout of three terms, as fluorescence is a saturating function of stability,
    mixed with a hidden landscape's score (`hidden_fraction` of the variance)."""
    z = standardise(scores)
    rep, sol, hbond = (z[:, SCORE_TERMS.index(t)] for t in ("fa_rep", "fa_sol", "hbond_sc"))
    readout = np.tanh(-0.8 * rep + 0.5 * hbond) - 0.3 * np.logaddexp(0.0, sol)
    if not hidden_fraction:
        return readout
    return np.sqrt(1 - hidden_fraction) * standardise(readout) + np.sqrt(hidden_fraction) * standardise(hidden)


def split_labels(rng: np.random.Generator, n: int, held_out_fraction: float, names: tuple[str, str]) -> np.ndarray:
    labels = np.full(n, names[0], dtype=object)
    labels[rng.permutation(n)[: max(1, round(n * held_out_fraction))]] = names[1]
    return labels


def generate(cfg: DataConfig, simulated_path: Path, experimental_path: Path, metadata_path: Path) -> None:
    rng = np.random.default_rng(cfg.seed)
    # Like a site-saturation library, variants mutate a fixed subset of sites: with a few
    # thousand variants each substitution is then seen often enough to be learnt.
    sites = np.sort(rng.choice(len(AVGFP), size=cfg.library_sites, replace=False))
    landscape = make_landscape(rng, AVGFP, sites, cfg.epistatic_pairs, cfg.epistasis_scale)
    variants = sample_variants(rng, AVGFP, sites, cfg.n_variants + cfg.n_experimental, cfg.max_mutations)
    tokens = encode_variants(variants, AVGFP)
    clean = score_variants(landscape, tokens, AVGFP)
    # Its own generator, so that hidden_fraction 0 leaves every other number as it was.
    hidden_landscape = make_landscape(np.random.default_rng([cfg.seed, 1]), AVGFP, sites, cfg.epistatic_pairs, cfg.epistasis_scale, 1)
    hidden = score_variants(hidden_landscape, tokens, AVGFP)[:, 0]
    simulated = clean[: cfg.n_variants] + rng.normal(scale=cfg.noise * clean.std(axis=0), size=(cfg.n_variants, len(SCORE_TERMS)))
    target = experimental_target(clean, hidden, cfg.hidden_fraction)[cfg.n_variants:]
    target = target + rng.normal(scale=cfg.experimental_noise * target.std(), size=target.shape)

    sim_split = split_labels(rng, cfg.n_variants, cfg.val_fraction, ("train", "val"))
    exp_split = split_labels(rng, cfg.n_experimental, cfg.experimental_test_fraction, ("train", "test"))
    write_tsv(simulated_path, ["variant", "split", *SCORE_TERMS],
              ([v, s, *(f"{x:.6f}" for x in row)] for v, s, row in zip(variants, sim_split, simulated)))
    write_tsv(experimental_path, ["variant", "split", "score"],
              ([v, s, f"{y:.6f}"] for v, s, y in zip(variants[cfg.n_variants:], exp_split, target)))
    metadata = {
        "SYNTHETIC": True,
        "description": "Seeded synthetic stand-in for Rosetta scores and an experimental assay; not real data.",
        "wild_type": {"name": "avGFP", "uniprot": "P42212", "length": len(AVGFP)},
        "score_terms": list(SCORE_TERMS),
        "experimental_target": "tanh(-0.8 fa_rep + 0.5 hbond_sc) - 0.3 softplus(fa_sol) (z-scored terms); with hidden_fraction h: "
                               "sqrt(1-h) z(that) + sqrt(h) z(hidden landscape); then + noise",
        "config": asdict(cfg),
    }
    metadata_path.write_text(json.dumps(metadata, indent=2) + "\n")


def write_tsv(path: Path, header: list[str], rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


@dataclass(frozen=True)
class Split:
    tokens: np.ndarray   # n x length, int64
    targets: np.ndarray  # n x outputs, float32


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def load_splits(path: Path, columns: tuple[str, ...], standardize_on: str = "train") -> dict[str, Split]:
    """Rows of a data TSV grouped by their split, targets z-scored with the training split's moments."""
    rows = read_tsv(path)
    missing = [c for c in ("variant", "split", *columns) if c not in rows[0]]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}; regenerate it with the make_data rule")
    values = np.array([[float(r[c]) for c in columns] for r in rows], dtype=np.float64)
    labels = np.array([r["split"] for r in rows])
    reference = values[labels == standardize_on]
    values = (values - reference.mean(axis=0)) / reference.std(axis=0)
    tokens = encode_variants([r["variant"] for r in rows])
    return {
        name: Split(tokens[labels == name], values[labels == name].astype(np.float32))
        for name in sorted(set(labels))
    }
