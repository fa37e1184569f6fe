"""A job whose output would overwrite an existing OSDF object, through the snakemake CLI,
the htcannex executor and the embedded pool: the pool holds it (OSDF objects are
immutable) and the user is told to write a new name, not that the command failed."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
OBJECT = "ospool/ap40/data/jdoe/run0/ckpt-1.pt"
# The job writes its output and, as a second writer would, publishes the same name at the
# origin before HTCondor transfers the output there.
SNAKEFILE = f'''
rule all:
    input:
        storage.osdf("osdf:///{OBJECT}"),


rule publish:
    output:
        storage.osdf("osdf:///{OBJECT}"),
    params:
        rival=config["origin"] + "/{OBJECT}",
    shell:
        "echo mine > {{output}}; mkdir -p $(dirname {{params.rival}}); echo theirs > {{params.rival}}"
'''

pytestmark = pytest.mark.slow


def test_output_over_an_existing_object_is_reported_with_the_rename_fix(tmp_path, embedded_pool):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    env = dict(os.environ, HTCANNEX_POOL_DIR=str(embedded_pool.spool_dir))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    result = subprocess.run(
        ["snakemake", "--profile", str(REPO / "profiles" / "local"), "--retries", "0",
         "--config", f"origin={embedded_pool.origin_dir}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )
    assert result.returncode != 0
    errors = result.stderr
    assert "HoldReasonCode 12" in errors and f"the OSDF object {OBJECT} already exists" in errors
    assert "give every chunk's output a new name" in errors
    assert "delete or rename the object at the origin" in errors
    assert "command most likely failed" not in errors
    assert "releasing HTCondor job" not in errors  # a release would only fail the same way
    # The job's bytes never replaced the object (the osdf storage plugin then sets the rival aside
    # as unfinished). HTCondor's upload goes on past a failed URL transfer (DoUpload's has_failure),
    # so the job's checksum sidecar may land too: it does not match the rival's bytes.
    contents = [path.read_text() for path in embedded_pool.origin_dir.rglob("ckpt-1.pt*")]
    assert "theirs\n" in contents and "mine\n" not in contents
    assert all(text == "theirs\n" or text.endswith("  ckpt-1.pt\n") for text in contents)
    assert embedded_pool.schedd().query("JobStatus != 4 && JobStatus != 3", ["ClusterId"]) == []
