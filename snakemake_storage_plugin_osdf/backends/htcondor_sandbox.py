"""Inside an HTCondor job whose submit moves the OSDF objects (backend ``htcondor``).

The submit (``osdf_transfer.plan``) lists every OSDF input as an ``osdf://`` URL in
``transfer_input_files`` (HTCondor drops it, with its sidecar, into the scratch
directory under its base name) and every OSDF output as a file under the job's storage
prefix, remapped to its ``osdf://`` URL. So in here the plugin moves no bytes:

- an input is found where HTCondor dropped it and moved to the local path the inner
  Snakemake expects (``.snakemake/storage/osdf/<object path>``), checksum verified;
- an output is left at that local path, with its sidecar written next to it, for
  HTCondor to send to the origin once the job exits.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Optional

from snakemake_interface_common.exceptions import WorkflowError

from snakemake_storage_plugin_osdf.backends import ObjectInfo


class HTCondorSandbox:
    committed_by_htcondor = True

    def __init__(self, storage_dir: Path, scratch_dir: Path):
        self.storage_dir = storage_dir
        self.scratch_dir = scratch_dir
        self.where = f"the job sandbox {scratch_dir}"

    def local_file(self, path: str) -> Path:
        return self.storage_dir / path.lstrip("/")

    def _landed(self, path: str) -> Path:
        return self.scratch_dir / PurePosixPath(path).name

    def _present(self, path: str) -> Optional[Path]:
        for candidate in (self.local_file(path), self._landed(path)):
            if candidate.is_file():
                return candidate
        return None

    def info(self, path: str) -> Optional[ObjectInfo]:
        present = self._present(path)
        if present is None:
            return None
        stat = present.stat()
        return ObjectInfo(size=stat.st_size, mtime=stat.st_mtime)

    def read_text(self, path: str) -> str:
        present = self._present(path)
        if present is None:
            raise FileNotFoundError(path)
        return present.read_text()

    def get(self, path: str, local: Path) -> None:
        if local.is_file():
            return
        landed = self._landed(path)
        if not landed.is_file():
            raise WorkflowError(
                f"osdf://{path} is not in the job sandbox {self.scratch_dir}: HTCondor "
                "did not transfer it. Its URL must be in the submit's "
                "transfer_input_files (osdf_transfer.plan puts it there)."
            )
        local.parent.mkdir(parents=True, exist_ok=True)
        landed.rename(local)

    def put(self, local: Path, path: str) -> None:
        # HTCondor sends the file at `local` to the URL after the job exits; the
        # origin, not this sandbox, decides whether the name is still free.
        if local != self.local_file(path):
            raise WorkflowError(
                f"osdf://{path}: the output must be at {self.local_file(path)} for "
                f"HTCondor to send it, but it is at {local}"
            )

    def remove(self, path: str) -> None:
        self.local_file(path).unlink(missing_ok=True)

    def digest_in_place(self, path: str) -> Optional[str]:
        return None

    def set_aside(self, path: str) -> str:
        raise WorkflowError(
            f"osdf://{path} arrived corrupt in the job sandbox; the job stops here so "
            "that the access point checks the object at the origin again."
        )
