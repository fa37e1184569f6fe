"""A local origin directory: ``osdf:///a/b/c`` is ``<root>/a/b/c``.

The embedded pool serves the same directory to its jobs' URL transfers, so what this
backend writes is what an ``osdf://`` transfer in the pool reads, and vice versa.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

from snakemake_interface_common.exceptions import WorkflowError

from snakemake_storage_plugin_osdf.backends import ObjectInfo
from snakemake_storage_plugin_osdf.integrity import sha256_of

SET_ASIDE_SUFFIX = ".corrupt"


class LocalOrigin:
    committed_by_htcondor = False

    def __init__(self, root: Path):
        self.root = root
        self.where = f"the local origin {root}"
        # Snakemake asks about an object many times (exists, mtime, size, inventory);
        # hash a checkpoint once per version of the file (size, mtime) in this process,
        # not once per question. Each Snakemake run starts with a fresh memo.
        self._digests: dict[tuple[str, int, int], str] = {}

    def file_of(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def info(self, path: str) -> Optional[ObjectInfo]:
        file = self.file_of(path)
        try:
            stat = file.stat()
        except FileNotFoundError:
            return None
        if file.is_dir():
            raise WorkflowError(
                f"osdf://{path} is a directory in the origin {self.root}; the osdf "
                "storage provider stores single files (pack directories into an archive)"
            )
        return ObjectInfo(size=stat.st_size, mtime=stat.st_mtime)

    def read_text(self, path: str) -> str:
        return self.file_of(path).read_text()

    def get(self, path: str, local: Path) -> None:
        # copy2 keeps the origin's mtime, so Snakemake sees the local copy as current
        shutil.copy2(self.file_of(path), local)

    def put(self, local: Path, path: str) -> None:
        target = self.file_of(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Write under a temporary name, then hard-link into place: the link fails if
        # the name exists (no overwrite, even in a race), and a reader never sees a
        # half-written object under the real name.
        fd, staging = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        os.close(fd)
        try:
            shutil.copyfile(local, staging)
            os.link(staging, target)
        finally:
            os.unlink(staging)

    def remove(self, path: str) -> None:
        # As on an OSPool access point, the origin's owner may delete; the name must
        # still not come back with other bytes on a real federation (caches).
        self.file_of(path).unlink(missing_ok=True)

    def digest_in_place(self, path: str) -> Optional[str]:
        file = self.file_of(path)
        stat = file.stat()
        version = (str(file), stat.st_size, stat.st_mtime_ns)
        if version not in self._digests:
            self._digests[version] = sha256_of(file)
        return self._digests[version]

    def set_aside(self, path: str) -> str:
        source = self.file_of(path)
        target = source.with_name(source.name + SET_ASIDE_SUFFIX)
        counter = 1
        while target.exists():
            counter += 1
            target = source.with_name(f"{source.name}{SET_ASIDE_SUFFIX}{counter}")
        source.rename(target)
        return str(target)
