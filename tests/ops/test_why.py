"""`htcannex why JOB`: the hold in plain words, or which Requirements clause fails on which slot."""
import getpass
import subprocess
import sys
import time
from pathlib import Path

import classad2
import htcondor2
import pytest

from snakemake_executor_plugin_htcannex.sites.catalogue import load_catalogue
from snakemake_executor_plugin_htcannex.ops.diagnose import explain_hold, never_matches, render_analysis
from snakemake_executor_plugin_htcannex.sites.matching import analyse_slot, catalogue_slot_ad

CATALOGUE = Path(__file__).parent / "workflows" / "faults" / "htcannex.yaml"
HTCANNEX = Path(sys.executable).parent / "htcannex"


def why(pool, job_id, *extra):
    return subprocess.run([str(HTCANNEX), "why", job_id, "--htcannex-config", str(CATALOGUE),
                           "--pool-dir", str(pool.spool_dir), *extra],
                          capture_output=True, text=True, timeout=60)


def submit(pool, tmp_path, **commands):
    description = htcondor2.Submit({"executable": "/bin/sleep", "arguments": "30", "initialdir": str(tmp_path),
                                    "log": str(tmp_path / "jobs.log"), "MY.HtcannexRule": '"train"',
                                    **commands})
    result = pool.schedd().submit(description)
    return f"{result.cluster()}.{result.first_proc()}"


def test_idle_job_names_the_failing_memory_clause_on_the_live_annex(embedded_pool, tmp_path):
    # The catalogue says site a has 2 GB slots, but the annex that came up has 512 MB ones.
    embedded_pool.create_annex("htcannex-a", owner=getpass.getuser(), cpus=1, memory_mb=512, lifetime_s=600)
    job = submit(embedded_pool, tmp_path, request_memory="1000MB", **{"MY.TargetAnnexName": '"htcannex-a"'})
    deadline = time.time() + 10
    while not embedded_pool.collector().query(htcondor2.AdTypes.Startd, 'AnnexName == "htcannex-a"', ["Name"]):
        assert time.time() < deadline, "annex did not come up"
        time.sleep(0.1)
    result = why(embedded_pool, job)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"job {job} (rule train) is idle" in out
    assert "annex htcannex-a: up, 1 slot(s)" in out
    live = out.split("slot1@htcannex-a-host1 [collector]: does not match")[1].split("[catalogue]")[0]
    assert ("FAILS (job Requirements) TARGET.Memory >= RequestMemory   "
            "[TARGET.Memory = 512, RequestMemory = 1000]") in live
    assert "lower mem_mb" in live
    assert "a (catalogue) [catalogue]: matches" in out  # the catalogue's 2 GB would do


def test_job_waiting_for_an_annex_that_is_not_up_says_so(embedded_pool, tmp_path):
    job = submit(embedded_pool, tmp_path, request_gpus="1", **{"MY.TargetAnnexName": '"htcannex-b"'})
    out = why(embedded_pool, job).stdout
    assert "annex htcannex-b: NOT UP" in out
    # No site of the catalogue has GPUs: every catalogue slot fails the GPU clause.
    for site in "abc":
        block = out.split(f"{site} (catalogue) [catalogue]: does not match")[1]
        assert "FAILS (job Requirements) TARGET.GPUs >= RequestGPUs" in block.split("[catalogue]")[0]
    assert ("FAILS (slot Requirements) MY.AnnexName is TARGET.TargetAnnexName   "
            "[MY.AnnexName = htcannex-a, TARGET.TargetAnnexName = htcannex-b]") in out


def held_for_memory(pool, tmp_path) -> str:
    """A job held for using more memory than it asked for."""
    job = submit(pool, tmp_path, executable=sys.executable, request_memory="60MB",
                 arguments="\"-c 'block = bytearray(300 * 2**20); import time; time.sleep(30)'\"")
    deadline = time.time() + 30
    while pool.schedd().query(f"ClusterId == {job.split('.')[0]}", ["JobStatus"])[0]["JobStatus"] != 5:
        assert time.time() < deadline, "the job was not held"
        time.sleep(0.2)
    return job


def test_memory_hold_is_explained_with_the_fix(embedded_pool, tmp_path):
    job = held_for_memory(embedded_pool, tmp_path)
    out = why(embedded_pool, job).stdout
    assert "is held" in out and "HoldReasonCode 34" in out
    assert "resources: mem_mb=lambda wildcards, attempt: 4000 * attempt" in out


def test_bad_job_id_and_unknown_job_are_clear_errors(embedded_pool):
    bad = why(embedded_pool, "twelve")
    assert bad.returncode == 2 and "give CLUSTER.PROC" in bad.stderr
    missing = why(embedded_pool, "999.0")
    assert missing.returncode == 1 and "neither in the queue nor in the history of that pool" in missing.stderr


def test_gpu_memory_and_capability_clause_fails_on_smaller_gpus_with_the_fix():
    nairr = load_catalogue(Path(__file__).parents[2] / "profiles" / "nairr" / "htcannex.yaml")
    job = classad2.ClassAd({"RequestGPUs": 1, "Owner": "u"})
    job["RequireGPUs"] = classad2.ExprTree("GlobalMemoryMb >= 40000 && Capability >= 8.0")  # as condor_submit
    job["Requirements"] = classad2.ExprTree(
        "(TARGET.GPUs >= RequestGPUs) && (countMatches(MY.RequireGPUs, TARGET.AvailableGPUs) >= RequestGPUs)")
    expanse = nairr.sites["expanse"]  # V100: 32 GB, capability 7.0
    anvil = nairr.sites["anvil"]  # A100: 40 GB, capability 8.0
    on_anvil = analyse_slot(job, catalogue_slot_ad(anvil, "u"), source="catalogue")
    assert not any(clause.fails for clause in on_anvil.job_side)
    text = "\n".join(render_analysis(analyse_slot(job, catalogue_slot_ad(expanse, "u"), source="catalogue")))
    assert "FAILS (job Requirements) countMatches(MY.RequireGPUs,TARGET.AvailableGPUs) >= RequestGPUs" in text
    assert "MY.RequireGPUs = GlobalMemoryMb >= 40000 && Capability >= 8.0" in text
    assert "GlobalMemoryMb = 32768" in text
    assert "too small or too old for gpu_memory / gpu_capability" in text
    assert "TARGET.GPUs >= RequestGPUs" not in text.split("FAILS")[0]  # one GPU is there: not a failure


@pytest.mark.parametrize("code, subcode, reason, words", [
    (13, 2, "Transfer input files failure", "Moving its files failed"),
    (12, 110, "Transfer output files failure", "Transient failures are released automatically"),
    (12, 2, "reading from file chunk1.pt: No such file", "its command most likely failed"),
    (12, 17, "File exists", "give every chunk's output a new name"),
    (12, 13, "Permission denied", "not writable by the user the job runs as"),
    (34, 102, "Memory usage exceeded", "give rule train_chunk more memory"),
    (34, 0, "Memory usage exceeded", "give rule train_chunk more memory"),  # before subcodes named it
    (26, 0, "memory usage 411 MB exceeded request_memory 100 MB", "give rule train_chunk more memory"),
    (21, 102, "The startd put the job on hold", "give rule train_chunk more memory"),
    (34, 104, "Disk usage exceeded", "give rule train_chunk more disk"),
    (26, 0, "the job's DiskUsage went over its RequestDisk", "give rule train_chunk more disk"),
    (26, 0, "site policy: too many restarts", "the analysis below has the match analysis"),  # why prints it below
    (47, 0, "The job exceeded allowed execute duration", "split the chunk: fewer epochs_per_job"),
    (15, 0, "submitted on hold at user's request", "It waits for its annex htcannex-a to come up"),
    (1, 0, "via condor_hold", "Someone (you, or a policy) held it"),
])
def test_each_hold_code_says_what_to_change(code, subcode, reason, words):
    lines = explain_hold(code, subcode, reason, "train_chunk", "7.0", target_annex="htcannex-a")
    assert lines[0] == f"held: {reason} (HoldReasonCode {code}, HoldReasonSubCode {subcode})"
    assert words in " ".join(lines[1:])


def test_a_job_removed_after_a_hold_says_it_was_held_why_and_removed(embedded_pool, tmp_path):
    job = held_for_memory(embedded_pool, tmp_path)
    # As the executor does with a hold it does not release.
    embedded_pool.schedd().act(htcondor2.JobAction.Remove, job, "held: over its memory request")
    out = why(embedded_pool, job).stdout
    assert f"job {job} (rule train) is removed" in out
    assert "removed from the queue: held: over its memory request" in out
    assert "it was held when it was removed" in out and "HoldReasonCode 34" in out
    assert "resources: mem_mb=lambda wildcards, attempt: 4000 * attempt" in out


class Collector:
    """A collector with one busy partitionable slot of 4 cores and 8 GB, as HTCondor advertises it."""

    def query(self, ad_type, constraint, projection):
        return [classad2.ClassAd({"Name": "slot1@host", "PartitionableSlot": True, "Cpus": 0, "TotalSlotCpus": 4,
                                  "Memory": 0, "TotalSlotMemory": 8192, "Start": classad2.ExprTree("true")})]


def test_a_job_waiting_for_a_busy_partitionable_slot_is_not_unmatchable():
    job = classad2.ClassAd({"RequestCpus": 2, "RequestMemory": 4096,
                            "Requirements": classad2.ExprTree("TARGET.Cpus >= RequestCpus && "
                                                              "TARGET.Memory >= RequestMemory")})
    assert never_matches(job, None, Collector()) is None
    job["RequestCpus"] = 64
    assert any("FAILS (job Requirements) TARGET.Cpus >= RequestCpus   [TARGET.Cpus = 4" in line
               for line in never_matches(job, None, Collector()))


def idle_on_annex_a(pool, job: str) -> tuple[str, str]:
    """What `htcannex why` says of a job left idle on annex htcannex-a once it is up: (its lines for the annex's
    live slot, which does not match, and the clauses it leaves not judged for catalogue site a, which matches)."""
    deadline = time.time() + 10
    while not pool.collector().query(htcondor2.AdTypes.Startd, 'AnnexName == "htcannex-a"', ["Name"]):
        assert time.time() < deadline, "annex did not come up"
        time.sleep(0.1)
    time.sleep(1)  # negotiation cycles: the job stays idle
    out = why(pool, job).stdout
    assert f"job {job} (rule train) is idle" in out
    live = out.split("slot1@htcannex-a-host1 [collector]: does not match")[1].split("[catalogue]")[0]
    catalogue = out.split("a (catalogue) [catalogue]: matches")[1].split("[catalogue]")[0]
    [unknown] = [line for line in catalogue.splitlines() if "not judged (the catalogue does not say): " in line]
    return live, unknown


def test_a_job_whose_osdf_url_no_plugin_on_the_annex_serves_is_told_to_use_an_execute_point_that_has_one(
        embedded_pool, tmp_path):
    # An annex whose execute points serve https only (HTCondor built without Pelican advertises no osdf either).
    embedded_pool.create_annex("htcannex-a", owner=getpass.getuser(), cpus=1, memory_mb=2048, lifetime_s=600,
                               transfer_methods="https")
    job = submit(embedded_pool, tmp_path, should_transfer_files="YES", when_to_transfer_output="ON_SUCCESS",
                 transfer_input_files="osdf:///ospool/run0/ckpt-1.pt", preserve_relative_paths="true",
                 **{"MY.TargetAnnexName": '"htcannex-a"'})
    live, unknown = idle_on_annex_a(embedded_pool, job)
    assert ('FAILS (job Requirements) stringListIMember("osdf",TARGET.HasFileTransferPluginMethods)   '
            '[TARGET.HasFileTransferPluginMethods = https]') in live
    assert "install the OSDF client on the execute point" in live
    # The catalogue does not say which plugins a site's execute points have: not judged there, nor failed.
    assert 'stringListIMember("osdf",TARGET.HasFileTransferPluginMethods)' in unknown


def test_a_container_job_on_an_annex_without_a_container_runtime_is_told_so(embedded_pool, tmp_path):
    embedded_pool.create_annex("htcannex-a", owner=getpass.getuser(), cpus=1, memory_mb=2048, lifetime_s=600,
                               containers=False)
    (tmp_path / "train.sif").write_text("not really an image")
    job = submit(embedded_pool, tmp_path, universe="container", container_image="train.sif",
                 should_transfer_files="YES", **{"MY.TargetAnnexName": '"htcannex-a"'})
    live, unknown = idle_on_annex_a(embedded_pool, job)
    assert "FAILS (job Requirements) TARGET.HasContainer" in live
    assert "no container runtime (Apptainer) that runs the job's image" in live
    # Nor does the catalogue say which sites run containers: not judged there.
    assert "TARGET.HasContainer;" in unknown
