"""Checksums for checkpoints: a sidecar object ``NAME.sha256`` next to every object.

The sidecar is one line in ``sha256sum`` format (``<hex>  <basename>``), so a user can
check a downloaded checkpoint with ``sha256sum -c NAME.sha256``. It is written *after*
the object it describes, which makes it the commit marker: an object without its
sidecar is an interrupted upload, never a finished checkpoint.

The training script uses the same two calls on its local files::

    write_with_checksum(path)   # after saving a checkpoint
    verify(path)                # before loading one; raises CorruptObjectError
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from snakemake_interface_common.exceptions import WorkflowError

SIDECAR_SUFFIX = ".sha256"
_CHUNK_BYTES = 1 << 20


class CorruptObjectError(WorkflowError):
    """A checkpoint whose bytes do not match its recorded checksum."""

    def __init__(self, name: str, expected: str, actual: str):
        self.name = name
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"Checkpoint {name} is corrupt or truncated: expected sha256 {expected}, "
            f"got {actual}. Do not resume from it: the chunk that produced it must run "
            "again."
        )


class MissingChecksumError(WorkflowError):
    """An object without its sidecar: never committed, so never to be trusted."""

    def __init__(self, name: str):
        self.name = name
        super().__init__(
            f"Checkpoint {name} has no checksum sidecar {name}{SIDECAR_SUFFIX}: its "
            "upload never finished. Write it again with write_with_checksum() (or let "
            "the osdf storage provider store it)."
        )


def sidecar_of(path: str | Path) -> Path:
    """The local sidecar file that belongs to ``path``."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while block := stream.read(_CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def format_sidecar(hexdigest: str, basename: str) -> str:
    return f"{hexdigest}  {basename}\n"


def parse_sidecar(text: str, name: str) -> str:
    """The hex digest recorded in a sidecar's text; ``name`` is used in errors only."""
    fields = text.split()
    if not fields or len(fields[0]) != 64 or not _is_hex(fields[0]):
        raise WorkflowError(
            f"Checksum sidecar {name}{SIDECAR_SUFFIX} is not in sha256sum format "
            "('<64 hex digits>  <file name>'); remove it and store the object again."
        )
    return fields[0].lower()


def _is_hex(text: str) -> bool:
    try:
        int(text, 16)
    except ValueError:
        return False
    return True


def write_with_checksum(path: str | Path) -> Path:
    """Write ``path``'s sidecar and return it. Call after the file is complete."""
    path = Path(path)
    sidecar = sidecar_of(path)
    sidecar.write_text(format_sidecar(sha256_of(path), path.name))
    return sidecar


def verify(path: str | Path, name: str | None = None) -> str:
    """Check ``path`` against its sidecar; return the digest.

    ``name`` is what errors call the file (e.g. its ``osdf://`` URL); the local path
    by default. Raises MissingChecksumError or CorruptObjectError.
    """
    path = Path(path)
    name = name or str(path)
    sidecar = sidecar_of(path)
    if not sidecar.exists():
        raise MissingChecksumError(name)
    expected = parse_sidecar(sidecar.read_text(), name)
    actual = sha256_of(path)
    if actual != expected:
        raise CorruptObjectError(name, expected, actual)
    return actual
