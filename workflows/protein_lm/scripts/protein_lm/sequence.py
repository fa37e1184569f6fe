"""The wild-type protein and how sequences are encoded."""

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


def encode(sequence: str) -> np.ndarray:
    """Residue ids of a sequence."""
    return np.array([AA_INDEX[aa] for aa in sequence], dtype=np.int64)
