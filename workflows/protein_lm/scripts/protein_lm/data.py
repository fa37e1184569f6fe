"""SYNTHETIC stand-ins for METL's data: simulated biophysical scores and a small experimental set.

METL pretrains on Rosetta energy terms computed for millions of variants, then fine-tunes on a
few hundred experimental measurements. Nothing here is measured or computed by Rosetta: a
seeded random "landscape" over avGFP gives each score term structure a model can learn:
per-site additive effects (sites differ in sensitivity, terms share latent factors, as Rosetta
terms correlate), pairwise epistasis between sampled residue pairs, and noise. The
"experimental" target is a nonlinear function of a few terms plus more noise and, with
`hidden_fraction` > 0, a hidden landscape no simulated term sees: the sim-to-real mismatch of
real assays, where Rosetta's terms explain only part of what is measured. With
`synthetic_protein_lengths`, random SYNTHETIC proteins of those lengths, each with its own
landscape and library, are pretrained on alongside avGFP, as METL-Global pretrains on many
proteins; the experimental set is avGFP's.

The files are numpy archives of binary columns (np.savez, uncompressed): a job reads them at
disk speed, without parsing text, and builds each batch's sequences from the substitutions.
"""

import json
import zipfile
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from .config import ConfigError
from .sequence import AA_INDEX, AMINO_ACIDS, AVGFP, encode

# Names borrowed from Rosetta's ref2015 energy terms; the values are synthetic.
SCORE_TERMS = ("fa_atr", "fa_rep", "fa_sol", "fa_elec", "hbond_sc", "rama_prepro")
LATENT_FACTORS = 3
MIN_PAIR_SEPARATION = 3
SPLITS = ("train", "val", "test")  # the files' split column counts these


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
    synthetic_protein_lengths: list    # more proteins (METL-Global style), SYNTHETIC sequences of these lengths

    def check(self, source: str) -> None:
        """What the schema cannot say: every protein is long enough for the library's sites."""
        if short := [n for n in self.synthetic_protein_lengths if n < self.library_sites]:
            raise ConfigError(f"{source}: data.synthetic_protein_lengths {short} are shorter than data.library_sites "
                              f"{self.library_sites}; lengthen them or lower library_sites")


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


def sample_variants(rng: np.random.Generator, wild_type: str, sites: np.ndarray, n: int, max_mutations: int) -> list[tuple]:
    """Distinct variants with 1..max_mutations substitutions at the library's sites, fewer
    mutations more likely; each a tuple of (0-based position, amino acid) sorted by position."""
    weights = 1.0 / np.arange(1, max_mutations + 1)
    variants: dict[tuple, None] = {}
    while len(variants) < n:
        k = int(rng.choice(np.arange(1, max_mutations + 1), p=weights / weights.sum()))
        positions = rng.choice(sites, size=k, replace=False)
        mutations = []
        for pos in positions:
            choices = [aa for aa in AMINO_ACIDS if aa != wild_type[pos]]
            mutations.append((int(pos), str(rng.choice(choices))))
        variants[tuple(sorted(mutations))] = None
    return list(variants)


def score_variants(landscape: Landscape, tokens: np.ndarray, wild_type: str) -> np.ndarray:
    """Noise-free score terms (n_variants x terms) for encoded variants."""
    length = len(wild_type)
    scores = landscape.additive[:, np.arange(length)[None, :], tokens].sum(axis=2).T
    wt = encode(wild_type)
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
    labels = np.full(n, SPLITS.index(names[0]), dtype=np.uint8)
    labels[rng.permutation(n)[: max(1, round(n * held_out_fraction))]] = SPLITS.index(names[1])
    return labels


def apply_mutations(tokens: np.ndarray, positions: np.ndarray, residues: np.ndarray) -> np.ndarray:
    """Write each row's substitutions (positions -1: none) into its copy of a wild type, in place."""
    row, column = np.nonzero(positions >= 0)
    tokens[row, positions[row, column]] = residues[row, column]
    return tokens


@dataclass(frozen=True)
class Library:
    """Variants of one wild type: substitutions as columns, with their noise-free scores."""
    wild_type: str
    positions: np.ndarray   # n x max_mutations, 0-based, -1 where a variant has fewer
    residues: np.ndarray    # n x max_mutations, amino-acid ids, -1 likewise
    tokens: np.ndarray      # n x length, the mutated sequences
    clean: np.ndarray       # n x terms, noise-free


def make_library(rng: np.random.Generator, wild_type: str, cfg: DataConfig, n: int) -> tuple[np.ndarray, Library]:
    """A site-saturation-like library of `n` variants of `wild_type` on its own landscape; returns
    the library's sites too (a second landscape on the same sites hides part of the target)."""
    # Like a site-saturation library, variants mutate a fixed subset of sites: with a few
    # thousand variants each substitution is then seen often enough to be learnt.
    sites = np.sort(rng.choice(len(wild_type), size=cfg.library_sites, replace=False))
    landscape = make_landscape(rng, wild_type, sites, cfg.epistatic_pairs, cfg.epistasis_scale)
    variants = sample_variants(rng, wild_type, sites, n, cfg.max_mutations)
    positions = np.full((n, cfg.max_mutations), -1, dtype=np.int16)
    residues = np.full((n, cfg.max_mutations), -1, dtype=np.int8)
    for row, mutations in enumerate(variants):
        for column, (position, aa) in enumerate(mutations):
            positions[row, column], residues[row, column] = position, AA_INDEX[aa]
    tokens = apply_mutations(np.tile(encode(wild_type), (n, 1)), positions, residues)
    return sites, Library(wild_type, positions, residues, tokens, score_variants(landscape, tokens, wild_type))


def synthetic_sequence(rng: np.random.Generator, length: int) -> str:
    """A SYNTHETIC protein: a start methionine, then residues drawn uniformly."""
    return "M" + "".join(rng.choice(list(AMINO_ACIDS), size=length - 1))


def generate(cfg: DataConfig, simulated_path: Path, experimental_path: Path, metadata_path: Path) -> None:
    cfg.check("data config")
    rng = np.random.default_rng(cfg.seed)
    sites, avgfp = make_library(rng, AVGFP, cfg, cfg.n_variants + cfg.n_experimental)
    # Its own generator, so that hidden_fraction 0 leaves every other number as it was.
    hidden_landscape = make_landscape(np.random.default_rng([cfg.seed, 1]), AVGFP, sites, cfg.epistatic_pairs, cfg.epistasis_scale, 1)
    hidden = score_variants(hidden_landscape, avgfp.tokens, AVGFP)[:, 0]
    simulated = avgfp.clean[: cfg.n_variants] + noise(rng, cfg, avgfp.clean, cfg.n_variants)
    target = experimental_target(avgfp.clean, hidden, cfg.hidden_fraction)[cfg.n_variants:]
    target = target + rng.normal(scale=cfg.experimental_noise * target.std(), size=target.shape)
    sim_split = split_labels(rng, cfg.n_variants, cfg.val_fraction, ("train", "val"))
    exp_split = split_labels(rng, cfg.n_experimental, cfg.experimental_test_fraction, ("train", "test"))

    # METL-Global: more proteins, each from its own generator (avGFP's numbers stay as they are).
    names, parts = ["avGFP"], [(avgfp, slice(cfg.n_variants), simulated, sim_split)]
    for k, length in enumerate(cfg.synthetic_protein_lengths, 1):
        other = np.random.default_rng([cfg.seed, 2, k])
        _, library = make_library(other, synthetic_sequence(other, length), cfg, cfg.n_variants)
        scores = library.clean + noise(other, cfg, library.clean, cfg.n_variants)
        names.append(f"SYN{k}")
        parts.append((library, slice(None), scores, split_labels(other, cfg.n_variants, cfg.val_fraction, ("train", "val"))))
    proteins = Proteins(tuple(names), tuple(library.wild_type for library, *_ in parts))
    write_variants(simulated_path, proteins, SCORE_TERMS, [
        (np.full(len(labels), index, dtype=np.uint16), library.positions[rows], library.residues[rows], scores, labels)
        for index, (library, rows, scores, labels) in enumerate(parts)])
    experimental = slice(cfg.n_variants, None)
    write_variants(experimental_path, proteins, ("score",), [
        (np.zeros(cfg.n_experimental, dtype=np.uint16), avgfp.positions[experimental], avgfp.residues[experimental],
         target[:, None], exp_split)])
    metadata = {
        "SYNTHETIC": True,
        "description": "Seeded synthetic stand-in for Rosetta scores and an experimental assay; not real data.",
        "wild_type": {"name": "avGFP", "uniprot": "P42212", "length": len(AVGFP)},
        "other_proteins": [{"name": name, "length": len(sequence), "sequence": sequence, "SYNTHETIC": True}
                           for name, sequence in zip(proteins.names[1:], proteins.sequences[1:])],
        "score_terms": list(SCORE_TERMS),
        "experimental_target": "tanh(-0.8 fa_rep + 0.5 hbond_sc) - 0.3 softplus(fa_sol) (z-scored terms); with hidden_fraction h: "
                               "sqrt(1-h) z(that) + sqrt(h) z(hidden landscape); then + noise; avGFP variants only",
        "config": asdict(cfg),
    }
    metadata_path.write_text(json.dumps(metadata, indent=2) + "\n")


def noise(rng: np.random.Generator, cfg: DataConfig, clean: np.ndarray, rows: int) -> np.ndarray:
    """Measurement noise for the first `rows` variants, scaled to each term's spread over all of them."""
    return rng.normal(scale=cfg.noise * clean.std(axis=0), size=(rows, clean.shape[1]))


@dataclass(frozen=True)
class Proteins:
    """The wild types a data file's variants mutate, in the order its `protein` column counts them."""
    names: tuple[str, ...]
    sequences: tuple[str, ...]

    @cached_property
    def lengths(self) -> np.ndarray:
        return np.array([len(s) for s in self.sequences], dtype=np.int64)

    @cached_property
    def tokens(self) -> np.ndarray:
        """proteins x the longest length; 0 past a shorter protein's end (the model masks it)."""
        tokens = np.zeros((len(self.sequences), self.lengths.max()), dtype=np.int64)
        for row, sequence in enumerate(self.sequences):
            tokens[row, :len(sequence)] = encode(sequence)
        return tokens


def write_variants(path: Path, proteins: Proteins, target_names: tuple[str, ...], parts: list[tuple]) -> None:
    """One archive of binary columns; `parts` are (protein, positions, residues, targets, split) per
    protein. Rows are stored by split, then protein (stably): a job then takes its split and each
    protein's rows as slices of the columns, without copies."""
    protein, positions, residues, targets, split = (np.concatenate(column) for column in zip(*parts))
    order = np.lexsort((protein, split))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:  # a file object: np.savez would append .npz to another suffix
        np.savez(handle, protein_names=np.array(proteins.names), wild_types=np.array(proteins.sequences),
                 split_names=np.array(SPLITS), target_names=np.array(target_names), protein=protein[order],
                 positions=positions[order], residues=residues[order], targets=targets[order].astype(np.float32),
                 split=split[order])


@dataclass(frozen=True)
class Split:
    """Variants of one split: which protein each mutates, its substitutions, its targets."""
    proteins: Proteins
    protein: np.ndarray      # n, index into proteins
    positions: np.ndarray    # n x max_mutations, -1 where a variant has fewer
    residues: np.ndarray     # n x max_mutations
    targets: np.ndarray      # n x outputs, float32

    def __len__(self) -> int:
        return len(self.protein)

    def subset(self, rows) -> "Split":
        return Split(self.proteins, self.protein[rows], self.positions[rows], self.residues[rows], self.targets[rows])

    def batch(self, rows=slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """The rows' sequences (residue ids, as long as the longest protein among them; 0 past a
        shorter one's end) and their protein indices, built from the substitutions: a job holds
        a few bytes per variant, not a sequence."""
        protein = self.protein[rows].astype(np.int64)
        tokens = self.proteins.tokens[protein, : self.proteins.lengths[protein].max()]  # a copy
        return apply_mutations(tokens, self.positions[rows], self.residues[rows]), protein


class DataError(ValueError):
    """A data file the workflow cannot read; the message names it and the fix."""


COLUMNS = ("protein_names", "wild_types", "split_names", "target_names", "protein", "positions", "residues", "targets", "split")


def blocks(values: np.ndarray) -> dict[int, slice]:
    """Where each value's run of rows is, in a column sorted by it."""
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    return {int(values[start]): slice(start, end) for start, end in zip(starts, np.r_[starts[1:], len(values)])}


def load_splits(path: Path, standardize_on: str = "train") -> dict[str, Split]:
    """A data file's variants grouped by split (slices of its columns), each protein's targets
    z-scored in place with the moments of its own `standardize_on` split (proteins' scores differ
    in scale, as Rosetta's do)."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            columns = {name: archive[name] for name in COLUMNS}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        raise DataError(f"{path}: not a protein_lm data file ({error}); regenerate it with the make_data rule") from None
    split, protein, targets = columns["split"], columns["protein"], columns["targets"]
    if np.any(np.diff(split.astype(np.int64) * 65536 + protein) < 0):
        raise DataError(f"{path}: rows are not sorted by split and protein; regenerate it with the make_data rule")
    proteins = Proteins(tuple(map(str, columns["protein_names"])), tuple(map(str, columns["wild_types"])))
    names = [str(columns["split_names"][code]) for code in blocks(split)]
    splits = {name: rows for name, rows in zip(names, blocks(split).values())}
    per_split = {name: {p: slice(rows.start + r.start, rows.start + r.stop) for p, r in blocks(protein[rows]).items()}
                 for name, rows in splits.items()}
    for index, reference in per_split[standardize_on].items():
        mean, std = targets[reference].mean(axis=0, dtype=np.float64), targets[reference].std(axis=0, dtype=np.float64)
        for rows in (within[index] for within in per_split.values() if index in within):
            targets[rows] -= mean.astype(np.float32)  # in place: no copy of a column of millions
            targets[rows] /= std.astype(np.float32)
    return {name: Split(proteins, protein[rows], columns["positions"][rows], columns["residues"][rows], targets[rows])
            for name, rows in splits.items()}
