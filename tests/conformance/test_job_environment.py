"""What a Snakemake job gets from htcannex on every backend (conftest.py), through the snakemake CLI: a PATH
(HTCondor starts a job without one, and a Python in the job that reads os.environ["PATH"] fails with a
KeyError), and its rule's mem_mb as the job's request_memory (left out, HTCondor's default asks for a few MB
and the job is held for memory or waits for a slot)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
SNAKEFILE = """\
rule all:
    input: "path.txt"

rule path:
    output: "path.txt"
    resources: mem_mb=300
    shell: "python3 -c 'import os; print(os.environ[\\"PATH\\"])' > {output}"
"""


def test_a_job_gets_a_path_and_asks_for_its_rule_s_mem_mb(backend):
    work = backend.submit_dir()
    (work / "Snakefile").write_text(SNAKEFILE)
    embedded = backend.name == "embedded"
    (work / "htcannex.yaml").write_text(yaml.safe_dump({"pool": "local" if embedded else "default",
                                                        "annex": {"mode": "off"},
                                                        "sites": {"pool": {"kind": "pool", "cpus": 1, "memory": "1GB"}}}))
    pool = ["--htcannex-pool-dir", str(backend.submit_base)] if embedded else []
    # umask 0: on a real pool HTCondor writes the event log and the output as the job's owner, not as this user.
    done = subprocess.run([str(BIN / "snakemake"), "--executor", "htcannex", "--jobs", "1", "--htcannex-config",
                           "htcannex.yaml", *pool], cwd=work, capture_output=True, text=True, umask=0,
                          env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"},
                          timeout=120 + 2 * backend.patience_s)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "/bin" in (work / "path.txt").read_text()
    [ad] = backend.schedd.history(f'HtcannexRule == "path" && Iwd == "{work}"', ["RequestMemory"], 1)
    assert ad["RequestMemory"] == 300
