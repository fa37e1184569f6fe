"""A chain of shell rules, each reading the one before from a directory, through the snakemake CLI on every
backend (conftest.py): each link finds its input at its path. On a real pool a link whose whole input is that
one file sends it as one transfer item, to the top of the sandbox, and its shell moves it into place
(submit/transfer_items.py); on the embedded pool it keeps its path."""
import os

import pytest

pytestmark = pytest.mark.slow
LINKS = 3
SNAKEFILE = f"""\
rule all:
    input: "steps/0/{LINKS - 1}.txt"

rule link:
    input: lambda w: [] if int(w.i) == 0 else [f"steps/0/{{int(w.i) - 1}}.txt"]
    output: "steps/0/{{i}}.txt"
    shell: "{{{{ cat {{input}} 2>/dev/null; echo {{wildcards.i}}; }}}} > {{output}}"
"""


def test_each_link_of_a_chain_finds_the_file_before_it_at_its_path(backend):
    work = backend.submit_dir()
    (work / "Snakefile").write_text(SNAKEFILE)
    embedded = backend.name == "embedded"
    done = backend.snakemake(work, "--jobs", "1", "--retries", "0", timeout_s=120 + 2 * LINKS * backend.patience_s)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (work / "steps" / "0" / f"{LINKS - 1}.txt").read_text() == "".join(f"{i}\n" for i in range(LINKS))
    assert not [name for name in os.listdir(work) if name.endswith(".txt")]  # nothing came back flat
    ads = backend.schedd.history(f'HtcannexRule == "link" && Iwd == "{work}"', ["TransferInput"], LINKS)
    listed = [ad.get("TransferInput", "").split(",") for ad in ads]
    for i in range(LINKS - 1):
        # The embedded pool also gets the output directories' tree (submit/output_directories.py).
        expected = f"steps/0/{i}.txt" if embedded else str(work / "steps" / "0" / f"{i}.txt")
        assert sum(expected in names if embedded else names == [expected] for names in listed) == 1, listed
