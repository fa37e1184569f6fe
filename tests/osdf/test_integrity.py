"""The checksum helpers the training script calls around its checkpoints."""

import subprocess

import pytest

from snakemake_storage_plugin_osdf.integrity import (
    CorruptObjectError,
    MissingChecksumError,
    verify,
    write_with_checksum,
)


def test_sidecar_is_checkable_with_sha256sum(tmp_path):
    checkpoint = tmp_path / "ckpt-3.pt"
    checkpoint.write_bytes(b"\x00model state\xff")
    sidecar = write_with_checksum(checkpoint)
    assert sidecar.name == "ckpt-3.pt.sha256"
    check = subprocess.run(["sha256sum", "-c", sidecar.name], cwd=tmp_path, capture_output=True)
    assert check.returncode == 0, check.stdout
    assert verify(checkpoint) == sidecar.read_text().split()[0]


def test_truncated_checkpoint_fails_with_expected_and_actual(tmp_path):
    checkpoint = tmp_path / "ckpt-3.pt"
    checkpoint.write_bytes(b"0123456789" * 100)
    write_with_checksum(checkpoint)
    checkpoint.write_bytes(b"0123456789" * 50)
    with pytest.raises(CorruptObjectError) as corrupt:
        verify(checkpoint, name="osdf:///ospool/x/ckpt-3.pt")
    message = str(corrupt.value)
    assert "osdf:///ospool/x/ckpt-3.pt is corrupt" in message
    assert corrupt.value.expected in message and corrupt.value.actual in message


def test_checkpoint_without_sidecar_is_not_trusted(tmp_path):
    checkpoint = tmp_path / "ckpt-3.pt"
    checkpoint.write_bytes(b"state")
    with pytest.raises(MissingChecksumError, match="ckpt-3.pt.sha256"):
        verify(checkpoint)


def test_garbled_sidecar_says_how_to_fix_it(tmp_path):
    checkpoint = tmp_path / "ckpt-3.pt"
    checkpoint.write_bytes(b"state")
    (tmp_path / "ckpt-3.pt.sha256").write_text("not a digest\n")
    with pytest.raises(Exception, match="not in sha256sum format"):
        verify(checkpoint)
