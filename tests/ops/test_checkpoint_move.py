"""A self-checkpointing chunk whose annex expires is moved to the next site and resumes from
its last checkpoint: no step is lost or repeated (recovery.next_site + recovery.retarget,
the calls the executor makes, on the embedded pool)."""
import getpass
import os
import sys
import time
from pathlib import Path

import classad2
import pytest

from snakemake_executor_plugin_htcannex import recovery
from snakemake_executor_plugin_htcannex.description import JobSpec, SubmitOptions, build_submit
from snakemake_executor_plugin_htcannex.sites import load_catalogue

CATALOGUE = Path(__file__).parent / "workflows" / "faults" / "htcannex.yaml"
STEPS = 6
# One step per start: resume from progress.txt, do a step, checkpoint (exit 85) until done.
TRAIN = f"""
import pathlib, re, time
progress = pathlib.Path("progress.txt")
lines = progress.read_text().splitlines() if progress.exists() else []
annex = re.search(r'AnnexName = "([^"]+)"', pathlib.Path(".machine.ad").read_text()).group(1)
time.sleep(0.4)
lines.append(f"step {{len(lines) + 1}} on {{annex}}")
progress.write_text("\\n".join(lines) + "\\n")
if len(lines) < {STEPS}:
    raise SystemExit(85)
pathlib.Path("chunk.txt").write_text(progress.read_text())
"""


def wait_for(condition, what, timeout=60):
    deadline = time.time() + timeout
    while not (value := condition()):
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


@pytest.mark.slow
def test_expired_annex_chunk_resumes_from_its_checkpoint_on_the_next_site(embedded_pool, tmp_path):
    catalogue = load_catalogue(CATALOGUE)
    site_a = catalogue.sites["a"]
    embedded_pool.create_annex(site_a.annex_name, owner=getpass.getuser(), lifetime_s=600, **site_a.slot_shape())
    wildcards = {"run": "0", "chunk": "0"}
    (tmp_path / "train.py").write_text(TRAIN)
    spec = JobSpec(rule="chunk", jobid=1, argv=[sys.executable, "train.py"], wildcards=wildcards,
                   inputs=["train.py"], outputs=["chunk.txt"], resources={"mem_mb": 500, "htcannex_submit": (
                       '{"checkpoint_exit_code": 85, "transfer_checkpoint_files": "progress.txt"}')})
    options = SubmitOptions(workdir=tmp_path, log_path=tmp_path / "jobs.log", environment={"PATH": os.environ["PATH"]})
    options.logs_dir.mkdir(parents=True)
    placed = catalogue.rotation.place("chunk", wildcards).site
    assert placed == "a"
    result = embedded_pool.schedd().submit(build_submit(spec, site_a, options))
    job = f"{result.cluster()}.{result.first_proc()}"
    query = f"ClusterId == {result.cluster()}"

    wait_for(lambda: embedded_pool.schedd().query(query, ["NumJobStarts"])[0]["NumJobStarts"] >= 3,
             "two checkpointed steps on site a")
    embedded_pool.inject_expire_annex(site_a.annex_name)
    [ad] = wait_for(lambda: embedded_pool.schedd().query(query + " && JobStatus == 1", []), "eviction to idle")

    site = recovery.next_site(catalogue.rotation, catalogue.sites, "chunk", wildcards, attempt=1,
                              tried={"a"}, job_ad=ad)
    assert site.name == "b"
    embedded_pool.create_annex(site.annex_name, owner=getpass.getuser(), lifetime_s=600, **site.slot_shape())
    recovery.retarget(embedded_pool.schedd(), job, site)

    [done] = wait_for(lambda: embedded_pool.schedd().history(query, ["ExitCode", "HtcannexSite"]), "completion")
    assert done["ExitCode"] == 0 and done["HtcannexSite"] == "b"
    steps = (tmp_path / "chunk.txt").read_text().splitlines()
    assert [line.split(" on ")[0] for line in steps] == [f"step {n}" for n in range(1, STEPS + 1)]
    annexes = [line.split(" on ")[1] for line in steps]
    assert annexes[:2] == ["htcannex-a"] * 2 and annexes[-1] == "htcannex-b"  # 2 steps done before expiry
    assert annexes == sorted(annexes)  # never back on a


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
