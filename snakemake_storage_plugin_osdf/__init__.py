"""Snakemake storage provider ``osdf``: checkpoints and data as OSDF objects.

``storage.osdf("osdf:///ospool/ap40/data/USER/protein_lm/run0/ckpt-e5.pt")`` names an
object; the backend setting says where it lives (see ``backends``). On top of every
backend this module keeps two promises:

- immutability: a name is written once (``store_object`` over an existing object is
  refused), because OSDF caches keep serving the first bytes written under a name;
- integrity: every object has a ``.sha256`` sidecar, written after it (``integrity``).
  An object whose sidecar is missing or does not match is *not there* as far as
  Snakemake is concerned: it is set aside at the origin, with a loud message, and
  Snakemake runs the job that produces it again. Bytes that arrive corrupt in a job
  fail that job with a CorruptObjectError naming the object and both checksums.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_storage_plugins.io import (
    WILDCARD_REGEX,
    IOCacheStorageInterface,
    Mtime,
)
from snakemake_interface_storage_plugins.settings import StorageProviderSettingsBase
from snakemake_interface_storage_plugins.storage_object import (
    StorageObjectRead,
    StorageObjectWrite,
)
from snakemake_interface_storage_plugins.storage_provider import (
    ExampleQuery,
    Operation,
    QueryType,
    StorageProviderBase,
    StorageQueryValidationResult,
)

from snakemake_storage_plugin_osdf import integrity, query
from snakemake_storage_plugin_osdf.backends import Backend, ObjectInfo
from snakemake_storage_plugin_osdf.backends.htcondor_sandbox import HTCondorSandbox
from snakemake_storage_plugin_osdf.backends.local_origin import LocalOrigin
from snakemake_storage_plugin_osdf.backends.pelican import PelicanFederation
from snakemake_storage_plugin_osdf.backends.tokens import discover_token

BACKENDS = ("pelican", "local", "htcondor")


@dataclass
class StorageProviderSettings(StorageProviderSettingsBase):
    backend: Optional[str] = field(
        default="pelican",
        metadata={
            "help": "Where objects live: 'pelican' (the OSDF federation via pelicanfs), "
            "'local' (an origin directory, see --storage-osdf-local-origin; the "
            "embedded pool serves it to jobs), or 'htcondor' (set by the htcannex "
            "executor inside jobs whose OSDF files HTCondor transfers).",
            "choices": BACKENDS,
            # passed to jobs through the environment, so that the executor can switch
            # a job's inner Snakemake to 'htcondor' (osdf_transfer.plan does)
            "env_var": True,
        },
    )
    local_origin: Optional[str] = field(
        default=None,
        metadata={
            "help": "Origin directory of the 'local' backend: osdf:///a/b/c is "
            "DIR/a/b/c. The embedded pool's is <spool>/osdf-origin.",
            "env_var": True,
        },
    )
    federation: Optional[str] = field(
        default="pelican://osg-htc.org",
        metadata={
            "help": "Discovery URL of the federation for the 'pelican' backend "
            "(OSDF: pelican://osg-htc.org).",
        },
    )
    token_file: Optional[str] = field(
        default=None,
        metadata={
            "help": "Bearer token file for the 'pelican' backend. Without it the token "
            "is found where OSDF clients look: BEARER_TOKEN, BEARER_TOKEN_FILE, "
            "$XDG_RUNTIME_DIR/bt_u$UID, /tmp/bt_u$UID, $_CONDOR_CREDS/*.use.",
        },
    )


class StorageProvider(StorageProviderBase):
    def __post_init__(self):
        settings = self.settings or StorageProviderSettings()
        self.backend: Backend = _make_backend(settings, self.local_prefix)
        if self.backend.committed_by_htcondor:
            # Snakemake deletes local copies of storage files when a job is done, but
            # in a job sandbox they are what HTCondor sends to the origin afterwards.
            self.keep_local = True

    @classmethod
    def example_queries(cls) -> List[ExampleQuery]:
        return [
            ExampleQuery(
                query="osdf:///ospool/ap40/data/jdoe/protein_lm/run0/ckpt-e5.pt",
                description="A checkpoint in the user's OSPool data namespace.",
                type=QueryType.ANY,
            ),
            ExampleQuery(
                query="osdf:///ospool/uc-shared/public/OSG-Staff/validation/test.txt",
                description="A public object, readable without a token.",
                type=QueryType.INPUT,
            ),
        ]

    def rate_limiter_key(self, query: str, operation: Operation) -> Any:
        return "osdf"

    def default_max_requests_per_second(self) -> float:
        return 10.0

    def use_rate_limiter(self) -> bool:
        return isinstance(self.backend, PelicanFederation)

    @classmethod
    def is_valid_query(cls, query_text: str) -> StorageQueryValidationResult:
        # wildcards are filled in later; only the literal parts must be valid now
        literal = WILDCARD_REGEX.sub("w", query_text)
        try:
            query.object_path(literal)
        except query.InvalidQuery as error:
            return StorageQueryValidationResult(
                query=query_text, valid=False, reason=str(error)
            )
        return StorageQueryValidationResult(query=query_text, valid=True)


def _make_backend(settings: StorageProviderSettings, local_prefix: Path) -> Backend:
    if settings.backend == "local":
        if not settings.local_origin:
            raise WorkflowError(
                "The osdf storage backend 'local' needs an origin directory: set "
                "--storage-osdf-local-origin DIR (or SNAKEMAKE_STORAGE_OSDF_LOCAL_ORIGIN); "
                "the embedded pool's is <spool>/osdf-origin."
            )
        root = Path(settings.local_origin).expanduser()
        if root.exists() and not root.is_dir():
            raise WorkflowError(
                f"The osdf local origin {root} (--storage-osdf-local-origin) is not a "
                "directory; point the setting at a directory (the pool's origin)."
            )
        # The embedded pool creates <spool>/osdf-origin only when its daemon starts,
        # which is after Snakemake sets up storage: a first run on a fresh clone
        # must not fail for that. A mistyped path shows up as an empty origin whose
        # path every "missing object" error names.
        root.mkdir(parents=True, exist_ok=True)
        return LocalOrigin(root)
    if settings.backend == "htcondor":
        scratch = os.environ.get("_CONDOR_SCRATCH_DIR") or os.getcwd()
        return HTCondorSandbox(storage_dir=local_prefix, scratch_dir=Path(scratch))
    if settings.backend == "pelican":
        if settings.token_file and not os.access(settings.token_file, os.R_OK):
            raise WorkflowError(
                f"The token file {settings.token_file} (--storage-osdf-token-file) is "
                "not readable; fix the path or leave the setting out to use the "
                "usual token locations."
            )
        return PelicanFederation(
            settings.federation or "pelican://osg-htc.org",
            discover_token(settings.token_file),
        )
    raise WorkflowError(
        f"Unknown osdf storage backend {settings.backend!r} (--storage-osdf-backend); "
        f"choose one of {', '.join(BACKENDS)}."
    )


class StorageObject(StorageObjectRead, StorageObjectWrite):
    def __post_init__(self):
        self.path = query.object_path(self.query)
        self.sidecar_path = self.path + integrity.SIDECAR_SUFFIX

    @property
    def backend(self) -> Backend:
        return self.provider.backend

    def local_suffix(self) -> str:
        return self.path.lstrip("/")

    async def inventory(self, cache: IOCacheStorageInterface):
        key = self.cache_key()
        if key in cache.exists_in_storage:
            return
        info = self._committed_info()
        cache.exists_in_storage[key] = info is not None
        if info is not None:
            cache.mtime[key] = Mtime(storage=info.mtime)
            cache.size[key] = info.size

    def get_inventory_parent(self) -> Optional[str]:
        return None

    def cleanup(self):
        # Snakemake deletes its local copy of the object; the sidecar is ours.
        if not self.backend.committed_by_htcondor:
            integrity.sidecar_of(self.local_path()).unlink(missing_ok=True)

    def exists(self) -> bool:
        return self._committed_info() is not None

    def mtime(self) -> float:
        return self._require_info().mtime

    def size(self) -> int:
        return self._require_info().size

    def checksum(self) -> Optional[str]:
        if self.backend.info(self.sidecar_path) is None:
            return None
        digest = integrity.parse_sidecar(
            self.backend.read_text(self.sidecar_path), self.query
        )
        return f"sha256:{digest}"

    def retrieve_object(self):
        local = self.local_path()
        self.backend.get(self.path, local)
        self.backend.get(self.sidecar_path, integrity.sidecar_of(local))
        integrity.verify(local, name=self.query)

    def store_object(self):
        local = self.local_path()
        sidecar = integrity.write_with_checksum(local)
        try:
            self.backend.put(local, self.path)
        except FileExistsError:
            raise WorkflowError(
                f"Refusing to overwrite {self.query}: it already exists, and OSDF "
                "objects are immutable (caches keep serving the first bytes written "
                "under a name). Every chunk must write a new name, e.g. put the run "
                "and chunk in the path: .../{run}/ckpt-{chunk}.pt."
            ) from None
        # the sidecar goes last: it is the mark of a finished upload
        self.backend.put(sidecar, self.sidecar_path)

    def remove(self):
        # Snakemake removes the outputs of a job it is about to run again. The sidecar
        # goes first, so an interruption leaves an uncommitted object, not a wrong one.
        self.backend.remove(self.sidecar_path)
        self.backend.remove(self.path)

    def _require_info(self) -> ObjectInfo:
        info = self._committed_info()
        if info is None:
            raise WorkflowError(
                f"{self.query} does not exist (or has no valid checksum sidecar) in "
                f"{self.backend.where}."
            )
        return info

    def _committed_info(self) -> Optional[ObjectInfo]:
        """The object's metadata if it is there and trustworthy, else None.

        Where the backend can hash the object without moving it (a local origin), a
        mismatch with the sidecar counts as absent too. An untrustworthy object is set
        aside so that the job producing it can write the name again.
        """
        info = self.backend.info(self.path)
        if info is None or self.backend.committed_by_htcondor:
            return info
        if self.backend.info(self.sidecar_path) is None:
            self._set_aside(integrity.MissingChecksumError(self.query))
            return None
        actual = self.backend.digest_in_place(self.path)
        if actual is None:
            return info
        expected = integrity.parse_sidecar(
            self.backend.read_text(self.sidecar_path), self.query
        )
        if actual != expected:
            self._set_aside(integrity.CorruptObjectError(self.query, expected, actual))
            return None
        return info

    def _set_aside(self, problem: WorkflowError) -> None:
        where = self.backend.set_aside(self.path)
        if self.backend.info(self.sidecar_path) is not None:
            self.backend.set_aside(self.sidecar_path)
        self.provider.logger.error(
            f"{problem} Moved it aside to {where}; Snakemake treats {self.query} as "
            "missing and runs the job that produces it again."
        )
