"""The osdf storage provider through the storage-plugin interface itself."""

import logging
from pathlib import Path

import pytest
from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_storage_plugins.tests import TestStorageBase

from snakemake_storage_plugin_osdf import StorageProvider, StorageProviderSettings
from snakemake_storage_plugin_osdf.integrity import CorruptObjectError

QUERY = "osdf:///ospool/ap40/data/jdoe/protein_lm/run0/ckpt-e1.pt"


class TestLocalOriginWithSnakemakeHarness(TestStorageBase):
    __test__ = True
    files_only = True

    def get_storage_provider_cls(self):
        return StorageProvider

    def get_storage_provider_settings(self):
        # the harness calls this once per provider; tmp_path is not passed, so use a
        # fixed directory under pytest's basetemp (see the autouse fixture below)
        return StorageProviderSettings(backend="local", local_origin=str(self.origin))

    def get_query(self, tmp_path) -> str:
        return QUERY

    def get_query_not_existing(self, tmp_path) -> str:
        return "osdf:///ospool/ap40/data/jdoe/protein_lm/run0/never-written.pt"

    @pytest.fixture(autouse=True)
    def _origin(self, tmp_path):
        self.origin = tmp_path / "origin"
        self.origin.mkdir()


def provider_for(tmp_path: Path, **settings) -> StorageProvider:
    return StorageProvider(
        local_prefix=tmp_path / "local",
        logger=logging.getLogger("test-osdf"),
        settings=StorageProviderSettings(**settings),
    )


@pytest.fixture
def origin(tmp_path):
    path = tmp_path / "origin"
    path.mkdir()
    return path


@pytest.fixture
def provider(tmp_path, origin):
    return provider_for(tmp_path, backend="local", local_origin=str(origin))


def store(provider, query, content: bytes):
    obj = provider.object(query)
    obj.local_path().parent.mkdir(parents=True, exist_ok=True)
    obj.local_path().write_bytes(content)
    obj.store_object()
    return obj


def test_store_writes_object_then_sha256sum_sidecar(provider, origin):
    store(provider, QUERY, b"weights")
    stored = origin / "ospool/ap40/data/jdoe/protein_lm/run0/ckpt-e1.pt"
    assert stored.read_bytes() == b"weights"
    sidecar = stored.with_name("ckpt-e1.pt.sha256").read_text()
    assert sidecar.endswith("  ckpt-e1.pt\n") and len(sidecar.split()[0]) == 64
    assert provider.object(QUERY).checksum() == "sha256:" + sidecar.split()[0]


def test_overwriting_an_object_is_refused_and_the_first_bytes_stay(provider, origin):
    store(provider, QUERY, b"first")
    with pytest.raises(WorkflowError) as refused:
        store(provider, QUERY, b"second")
    message = str(refused.value)
    assert QUERY in message and "immutable" in message and "new name" in message
    assert (origin / "ospool/ap40/data/jdoe/protein_lm/run0/ckpt-e1.pt").read_bytes() == b"first"


def test_corrupt_object_counts_as_missing_and_is_set_aside(provider, origin, caplog):
    store(provider, QUERY, b"good weights")
    stored = origin / "ospool/ap40/data/jdoe/protein_lm/run0/ckpt-e1.pt"
    stored.write_bytes(b"bad! weights")
    with caplog.at_level(logging.ERROR, logger="test-osdf"):
        assert not provider.object(QUERY).exists()
    assert "corrupt" in caplog.text and QUERY in caplog.text and "expected sha256" in caplog.text
    assert not stored.exists()
    assert stored.with_name("ckpt-e1.pt.corrupt").read_bytes() == b"bad! weights"
    # the name is free again, so the producing job can write it once more
    store(provider, QUERY, b"good weights")
    assert provider.object(QUERY).exists()


def test_object_without_sidecar_is_an_unfinished_upload(provider, origin):
    stored = origin / "ospool/ap40/data/jdoe/protein_lm/run0/ckpt-e1.pt"
    stored.parent.mkdir(parents=True)
    stored.write_bytes(b"half an upl")
    assert not provider.object(QUERY).exists()
    assert stored.with_name("ckpt-e1.pt.corrupt").exists()


def test_retrieving_bytes_that_went_bad_fails_with_both_checksums(provider, origin):
    obj = store(provider, QUERY, b"good weights")
    assert obj.exists()  # checked while still good, as Snakemake does before a job
    (origin / "ospool/ap40/data/jdoe/protein_lm/run0/ckpt-e1.pt").write_bytes(b"bad")
    obj.local_path().unlink()
    with pytest.raises(CorruptObjectError) as corrupt:
        obj.retrieve_object()
    assert corrupt.value.name == QUERY
    assert corrupt.value.expected != corrupt.value.actual
    assert corrupt.value.expected in str(corrupt.value) and corrupt.value.actual in str(corrupt.value)


def test_missing_object_error_names_it_and_the_origin(provider, origin):
    obj = provider.object("osdf:///ospool/ap40/data/jdoe/nothing.pt")
    assert not obj.exists()
    with pytest.raises(WorkflowError, match=r"osdf:///ospool/ap40/data/jdoe/nothing.pt does not exist.*local origin"):
        obj.size()


@pytest.mark.parametrize(
    "bad, says",
    [
        ("https://example.org/x", "not an OSDF URL"),
        ("osdf://ospool/ap40/x", "host part"),
        ("osdf:///ospool", "below a namespace"),
        ("osdf:///ospool/../etc/passwd", "'..'"),
        ("osdf:///ospool/a,b.pt", "','"),
        ("osdf:///ospool/x.pt?authz=abc", "query string"),
    ],
)
def test_invalid_queries_say_what_to_write(bad, says):
    result = StorageProvider.is_valid_query(bad)
    assert not result.valid and says in result.reason


def test_wildcards_are_valid_in_queries():
    assert StorageProvider.is_valid_query("osdf:///ospool/ap40/{run}/ckpt-{chunk,\\d+}.pt")


def test_local_backend_without_origin_says_which_setting(tmp_path):
    with pytest.raises(WorkflowError, match="--storage-osdf-local-origin"):
        provider_for(tmp_path, backend="local")
    not_a_directory = tmp_path / "a-file"
    not_a_directory.write_text("")
    with pytest.raises(WorkflowError, match="is not a directory"):
        provider_for(tmp_path, backend="local", local_origin=str(not_a_directory))


def test_local_backend_creates_a_missing_origin(tmp_path):
    # The pool makes <spool>/osdf-origin only once its daemon runs, after storage setup.
    origin = tmp_path / ".htcannex" / "pool" / "osdf-origin"
    provider_for(tmp_path, backend="local", local_origin=str(origin))
    assert origin.is_dir()


def test_unreadable_token_file_is_named(tmp_path):
    with pytest.raises(WorkflowError, match="--storage-osdf-token-file"):
        provider_for(tmp_path, backend="pelican", token_file=str(tmp_path / "no-token"))


def test_a_checkpoint_that_goes_bad_after_a_good_run_is_caught_by_the_next_run(
    provider, origin, tmp_path
):
    assert store(provider, QUERY, b"good weights").exists()
    (origin / "ospool/ap40/data/jdoe/protein_lm/run0/ckpt-e1.pt").write_bytes(b"bad! weights")
    next_run = provider_for(tmp_path, backend="local", local_origin=str(origin))
    assert not next_run.object(QUERY).exists()
