"""Where OSDF objects live. Each backend offers the same few operations on an
object path (``/<namespace>/<path>``); the storage object in ``__init__`` adds
immutability and checksums on top, the same way for all of them.

- ``pelican``:  the real federation, through pelicanfs.
- ``local``:    an origin directory on this machine (the embedded pool's, or a test's).
- ``htcondor``: inside an HTCondor job whose submit moved the objects (see
  ``snakemake_executor_plugin_htcannex.submit.osdf_transfer``): the sandbox is the origin.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol


@dataclass(frozen=True)
class ObjectInfo:
    size: int
    mtime: float


class Backend(Protocol):
    #: how messages name this backend, e.g. "the local origin /srv/origin"
    where: str
    #: True in a job sandbox: outputs are committed by HTCondor's transfer after the
    #: job exits, so a lookup does not demand the sidecar yet, and the local copies
    #: (what HTCondor will send) must never be cleaned up.
    committed_by_htcondor: bool

    def info(self, path: str) -> Optional[ObjectInfo]:
        """Size and mtime of the object, or None if there is none."""

    def read_text(self, path: str) -> str:
        """A small object's content (the checksum sidecars)."""

    def get(self, path: str, local: Path) -> None:
        """Copy the object's bytes to ``local``."""

    def put(self, local: Path, path: str) -> None:
        """Publish ``local`` under ``path``; FileExistsError if the name is taken."""

    def remove(self, path: str) -> None:
        """Delete the object (Snakemake does before it runs a job again); a missing
        object is not an error. Raises WorkflowError where objects cannot be deleted."""

    def digest_in_place(self, path: str) -> Optional[str]:
        """The object's sha256, if it can be had without moving the bytes off the
        storage (a local origin); None otherwise (the federation)."""

    def set_aside(self, path: str) -> str:
        """Move a corrupt or uncommitted object out of the way so its name can be
        written again; return where it went. Raises WorkflowError where impossible."""
