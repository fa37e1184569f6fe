"""The wild-type protein and how variants of it are written and encoded."""

import numpy as np

# Green fluorescent protein of Aequorea victoria (avGFP), UniProt P42212, 238 residues.
# The chromophore is Ser65-Tyr66-Gly67 (1-based).
AVGFP = (
    "MSKGEELFTGVVPILVELDGDVNGHKFSVSGEGEGDATYGKLTLKFICTTGKLPVPWPTLVTTFSYGVQCFSRYPDHMKQ"
    "HDFFKSAMPEGYVQERTIFFKDDGNYKTRAEVKFEGDTLVNRIELKGIDFKEDGNILGHKLEYNYNSHNVYIMADKQKNGI"
    "KVNFKIRHNIEDGSVQLADHYQQNTPIGDGPVLLPDNHYLSTQSALSKDPNEKRDHMVLLEFVTAAGITHGMDELYK"
)
AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"
AA_INDEX = {aa: i for i, aa in enumerate(AMINO_ACIDS)}


class VariantError(ValueError):
    """A variant string that does not describe mutations of the wild type."""


def parse_variant(variant: str, wild_type: str = AVGFP) -> list[tuple[int, str]]:
    """``"S65T,Y66H"`` -> ``[(64, "T"), (65, "H")]`` (0-based positions), checked against the wild type."""
    mutations = []
    for token in variant.split(","):
        wt, pos, mut = token[0], token[1:-1], token[-1]
        if not pos.isdigit() or mut not in AA_INDEX:
            raise VariantError(f"mutation {token!r} is not of the form <wt><1-based position><aa>")
        index = int(pos) - 1
        if not 0 <= index < len(wild_type) or wild_type[index] != wt:
            raise VariantError(f"mutation {token!r} does not match the wild type at position {pos}")
        mutations.append((index, mut))
    return mutations


def format_variant(mutations: list[tuple[int, str]], wild_type: str = AVGFP) -> str:
    return ",".join(f"{wild_type[i]}{i + 1}{aa}" for i, aa in sorted(mutations))


def encode_variants(variants: list[str], wild_type: str = AVGFP) -> np.ndarray:
    """Token ids (n_variants x sequence length) of the mutated sequences."""
    base = np.array([AA_INDEX[aa] for aa in wild_type], dtype=np.int64)
    tokens = np.tile(base, (len(variants), 1))
    for row, variant in enumerate(variants):
        for index, aa in parse_variant(variant, wild_type):
            tokens[row, index] = AA_INDEX[aa]
    return tokens
