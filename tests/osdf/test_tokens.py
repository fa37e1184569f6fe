"""Where the pelican backend finds its bearer token: the places OSDF clients look."""

import logging
import os

import pytest

from snakemake_storage_plugin_osdf.backends.tokens import discover_token, redact

TOKEN_VARIABLES = ("BEARER_TOKEN", "BEARER_TOKEN_FILE", "TOKEN", "_CONDOR_CREDS")


@pytest.fixture
def no_token_anywhere(tmp_path, monkeypatch):
    for variable in TOKEN_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    # the default file is $XDG_RUNTIME_DIR/bt_u$UID: point it at an empty directory
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "runtime"))
    (tmp_path / "runtime").mkdir()
    monkeypatch.chdir(tmp_path)  # no ./.condor_creds either
    return tmp_path


def test_no_token_means_none_not_an_interactive_login(no_token_anywhere):
    assert discover_token() is None


def test_explicit_token_file_comes_first(no_token_anywhere, monkeypatch):
    (no_token_anywhere / "mine").write_text("tok-from-setting\n")
    monkeypatch.setenv("BEARER_TOKEN", "tok-from-environment")
    assert discover_token(str(no_token_anywhere / "mine")) == "tok-from-setting"


def test_bearer_token_variables(no_token_anywhere, monkeypatch):
    (no_token_anywhere / "file").write_text("tok-from-file\n")
    monkeypatch.setenv("BEARER_TOKEN_FILE", str(no_token_anywhere / "file"))
    assert discover_token() == "tok-from-file"
    monkeypatch.setenv("BEARER_TOKEN", "tok-from-environment")
    assert discover_token() == "tok-from-environment"


def test_default_bearer_token_file_in_the_runtime_dir(no_token_anywhere):
    (no_token_anywhere / "runtime" / f"bt_u{os.getuid()}").write_text("tok-default\n")
    assert discover_token() == "tok-default"


def test_htcondor_credentials_directory(no_token_anywhere, monkeypatch):
    creds = no_token_anywhere / "creds"
    creds.mkdir()
    (creds / "ospool.use").write_text("tok-ospool-service\n")
    monkeypatch.setenv("_CONDOR_CREDS", str(creds))
    assert discover_token() == "tok-ospool-service"
    (creds / "scitokens.use").write_text("tok-from-htcondor\n")
    assert discover_token() == "tok-from-htcondor"


def test_discovery_never_logs_the_token_even_at_debug(no_token_anywhere, caplog):
    (no_token_anywhere / "runtime" / f"bt_u{os.getuid()}").write_text("tok-0123456789-secret\n")
    with caplog.at_level(logging.DEBUG):
        assert discover_token() == "tok-0123456789-secret"
    assert "tok-0123" not in caplog.text


def test_redact_hides_the_token_in_messages():
    assert redact("403 for Bearer tok-123 at /x", "tok-123") == "403 for Bearer <token> at /x"
    assert redact("no token here", None) == "no token here"
