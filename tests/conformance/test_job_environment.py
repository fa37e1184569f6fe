"""What a Snakemake job gets from htcannex on every backend (conftest.py), through the snakemake CLI: a PATH
(HTCondor starts a job without one, and a Python in the job that reads os.environ["PATH"] fails with a
KeyError), and its rule's mem_mb as the job's request_memory (left out, HTCondor's default asks for a few MB
and the job is held for memory or waits for a slot)."""

import pytest

pytestmark = pytest.mark.slow
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
    done = backend.snakemake(work, "--jobs", "1", timeout_s=120 + 2 * backend.patience_s)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "/bin" in (work / "path.txt").read_text()
    [ad] = backend.schedd.history(f'HtcannexRule == "path" && Iwd == "{work}"', ["RequestMemory"], 1)
    assert ad["RequestMemory"] == 300
