"""recovery.py's pieces on their own (end to end in test_faults.py)."""
import subprocess
from pathlib import Path

import classad2
import pytest

from snakemake_executor_plugin_htcannex import recovery
from snakemake_executor_plugin_htcannex.sites import load_catalogue

CATALOGUE = Path(__file__).parent / "workflows" / "faults" / "htcannex.yaml"


@pytest.mark.parametrize("command, marker, status", [
    ("(exit 1)", "85", 85),  # Snakemake's exit 1 after a checkpointing script: the job exits 85
    ("(exit 3)", None, 3),  # a plain failure keeps its status
    ("true", None, 0),
])
def test_job_exits_with_the_checkpoint_code_its_script_left(tmp_path, command, marker, status):
    if marker:
        (tmp_path / recovery.CHECKPOINT_EXIT_MARKER).write_text(marker + "\n")
    result = subprocess.run(["/bin/sh", "-c", recovery.with_checkpoint_exit(command)], cwd=tmp_path)
    assert result.returncode == status
    assert not (tmp_path / recovery.CHECKPOINT_EXIT_MARKER).exists()  # the restarted job starts clean


def test_next_site_skips_sites_whose_slots_cannot_run_the_job():
    catalogue = load_catalogue(CATALOGUE)
    job = classad2.ClassAd({"RequestMemory": 1024, "RequestCpus": 1, "Owner": "u"})
    job["TargetAnnexName"] = "htcannex-a"
    job["Requirements"] = classad2.ExprTree("(TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) "
                                            "&& (TARGET.AnnexName =?= MY.TargetAnnexName)")
    wildcards = {"run": "0", "chunk": "0"}
    assert recovery.next_site(catalogue.rotation, catalogue.sites, "chunk", wildcards, 1, {"a"}, job).name == "b"
    assert recovery.next_site(catalogue.rotation, catalogue.sites, "chunk", wildcards, 1, {"a", "b"}, job).name == "c"
    assert recovery.next_site(catalogue.rotation, catalogue.sites, "chunk", wildcards, 1, {"a", "b", "c"}, job) is None
    job["RequestMemory"] = 4096  # more than any site's 2 GB slot
    assert recovery.next_site(catalogue.rotation, catalogue.sites, "chunk", wildcards, 1, {"a"}, job) is None
