"""The real federation through pelicanfs: reads come from a cache the director picks,
writes go to the origin with an HTTP PUT (``put_file``), since OSDF objects are
written once and never edited in place."""

from __future__ import annotations

import contextlib
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Iterator, Optional

from snakemake_interface_common.exceptions import WorkflowError

from snakemake_storage_plugin_osdf.backends import ObjectInfo
from snakemake_storage_plugin_osdf.backends.tokens import redact


class PelicanFederation:
    committed_by_htcondor = False

    def __init__(self, discovery_url: str, token: Optional[str]):
        self.discovery_url = discovery_url
        self.where = f"the federation {discovery_url}"
        self._token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # Imported here: pelicanfs (aiohttp) takes ~1 s to import, and every Snakemake
        # process imports this plugin, also every job's own Snakemake (docs/benchmarks.md).
        from pelicanfs.core import PelicanFileSystem

        self.fs = PelicanFileSystem(discovery_url, headers=headers)

    @contextlib.contextmanager
    def _talking(self, what: str, path: str) -> Iterator[None]:
        """Turn library errors into WorkflowErrors that never carry the token."""
        try:
            yield
        except (FileNotFoundError, FileExistsError, WorkflowError):
            raise
        except Exception as error:
            message = redact(f"{type(error).__name__}: {error}", self._token)
            raise WorkflowError(
                f"OSDF {what} of osdf://{path} via {self.discovery_url} failed: {message}. "
                "A refused token looks like an unreachable cache to pelicanfs: check the "
                "token (--storage-osdf-token-file, BEARER_TOKEN, BEARER_TOKEN_FILE) and "
                "the federation (--storage-osdf-federation)."
            ) from None

    def info(self, path: str) -> Optional[ObjectInfo]:
        with self._talking("metadata lookup", path):
            try:
                details = self.fs.info(path)
            except FileNotFoundError:
                return None
        return ObjectInfo(size=int(details["size"]), mtime=_http_date(details["mtime"]))

    def read_text(self, path: str) -> str:
        with self._talking("read", path):
            return self.fs.cat_file(path).decode()

    def get(self, path: str, local: Path) -> None:
        with self._talking("download", path):
            self.fs.get_file(path, str(local))

    def put(self, local: Path, path: str) -> None:
        # An origin may accept a PUT over an existing name, and caches would keep
        # serving the old bytes; so look first. (Not atomic: two writers of one name
        # are a workflow bug that this narrows, not closes.)
        if self.info(path) is not None:
            raise FileExistsError(path)
        with self._talking("upload", path):
            self.fs.put_file(str(local), path)

    def remove(self, path: str) -> None:
        if self.info(path) is None:
            return
        raise WorkflowError(
            f"Cannot remove osdf://{path}: OSDF objects are immutable and a federation "
            "client cannot delete them. Snakemake removes the outputs of a job it runs "
            "again; write the rerun under a new name (e.g. a new run id) instead."
        )

    def digest_in_place(self, path: str) -> Optional[str]:
        return None

    def set_aside(self, path: str) -> str:
        raise WorkflowError(
            f"osdf://{path} is corrupt or was never committed, and a federation client "
            "cannot move or delete objects. Delete it at the origin (on an OSPool access "
            "point: rm it under /ospool/<ap>/data/$USER) and wait for caches to expire, "
            "or write the run under a new name."
        )


def _http_date(value: object) -> float:
    """WebDAV gives getlastmodified as an HTTP date; an origin may omit it."""
    if not value:
        return 0.0
    return parsedate_to_datetime(str(value)).timestamp()
