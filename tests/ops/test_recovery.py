"""recovery.py's and adoption.py's pieces on their own (end to end in test_faults.py)."""
import getpass
from pathlib import Path

import classad2
import htcondor2
from waiting import wait_until

from snakemake_executor_plugin_htcannex.track import adoption

from snakemake_executor_plugin_htcannex.track import recovery
from snakemake_executor_plugin_htcannex.sites.catalogue import load_catalogue
from snakemake_executor_plugin_htcannex.sites.site import ResourceRequest

CATALOGUE = Path(__file__).parent / "workflows" / "faults" / "htcannex.yaml"


def test_next_site_skips_sites_whose_slots_cannot_run_the_job():
    catalogue = load_catalogue(CATALOGUE)
    job = classad2.ClassAd({"RequestMemory": 1024, "RequestCpus": 1, "Owner": "u"})
    job["TargetAnnexName"] = "htcannex-a"
    job["Requirements"] = classad2.ExprTree("(TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) "
                                            "&& (TARGET.AnnexName =?= MY.TargetAnnexName)")
    request = ResourceRequest(cpus=1, memory_mb=1024)

    def next_site(tried, request=request):
        site = recovery.next_site(catalogue.rotation, catalogue.sites, "chunk", {"run": "0", "chunk": "0"}, 1,
                                  tried, job, request)
        return site and site.name

    assert next_site({"a"}) == "b"
    assert next_site({"a", "b"}) == "c"
    assert next_site({"a", "b", "c"}) is None
    assert next_site({"a"}, ResourceRequest(runtime_s=3600)) is None  # no site admits it: 30 min annexes
    job["RequestMemory"] = 4096  # more than any site's 2 GB slot
    assert next_site({"a"}) is None


class RecordingSchedd:
    """A schedd whose history holds `ads`; it records every history query."""

    def __init__(self, ads):
        self.ads, self.queries = ads, []

    def history(self, constraint, projection, match=-1):
        self.queries.append((constraint, match))
        selected = [ad for ad in self.ads if classad2.ExprTree(constraint).eval(ad)]
        return selected[:match] if match >= 0 else selected


def finished(cluster, signature, exit_code=0, status=4):
    return classad2.ClassAd({"ClusterId": cluster, "ProcId": 0, "JobStatus": status, "ExitCode": exit_code,
                             "HtcannexSignature": signature})


def test_finished_jobs_adopts_only_the_marked_job_that_completed_with_exit_code_0():
    schedd = RecordingSchedd([finished(1, "s1"), finished(2, "s2", exit_code=1), finished(3, "s3", status=3),
                              finished(4, "s4"), finished(9, "s9")])
    jobs = adoption.FinishedJobs(schedd, lambda: ["1.0", "2.0", "3.0", "4.0", "5.0", "slurm-77"])
    assert adoption.job_id(jobs.completed(["1.0"], "s1")) == "1.0"
    assert jobs.completed(["2.0"], "s2") is None  # failed
    assert jobs.completed(["3.0"], "s3") is None  # removed
    assert jobs.completed(["4.0"], "another job's signature") is None  # e.g. a marker from another pool
    assert jobs.completed(["5.0"], "s5") is None  # not in the history (still queued, or rotated away)
    assert jobs.completed(["1.0", "4.0"], "s1") is None  # several submissions: Snakemake cannot resume either
    assert jobs.completed([], "s9") is None  # no marker: Snakemake saw it end (a --forcerun reruns it)
    # One query for the whole run, only for the marked clusters, stopping once they are found.
    assert schedd.queries == [("HtcannexSignature isnt undefined && member(ClusterId, {1, 2, 3, 4, 5})", 5)]


def test_finished_jobs_asks_nothing_when_no_job_is_marked():
    schedd = RecordingSchedd([finished(1, "s1")])
    jobs = adoption.FinishedJobs(schedd, lambda: [])
    assert jobs.completed(["1.0"], "s1") is None
    assert schedd.queries == []


def test_a_container_job_on_an_annex_without_a_container_runtime_is_stuck_there(embedded_pool, tmp_path):
    # The annex's slots advertise no HasContainer: undefined in the job's Requirements, so the negotiator never
    # matches them, and recovery moves the job on (it took such a slot for one that matches until 2026-12-05).
    embedded_pool.create_annex("htcannex-a", owner=getpass.getuser(), cpus=1, memory_mb=2048, lifetime_s=600,
                               containers=False)
    (tmp_path / "train.sif").write_text("not really an image")
    cluster = embedded_pool.schedd().submit(htcondor2.Submit({
        "executable": "/bin/true", "universe": "container", "container_image": "train.sif", "hold": "true",
        "should_transfer_files": "YES", "initialdir": str(tmp_path), "log": str(tmp_path / "jobs.log"),
        "MY.TargetAnnexName": '"htcannex-a"', "requirements": "TARGET.AnnexName =?= MY.TargetAnnexName"})).cluster()
    wait_until(lambda: embedded_pool.collector().query(htcondor2.AdTypes.Startd, 'AnnexName == "htcannex-a"', []),
               10, "annex htcannex-a up")
    [job] = embedded_pool.schedd().query(f"ClusterId == {cluster}", [])
    stuck = recovery.stuck_on_annex(embedded_pool.collector(), job, "htcannex-a")
    assert stuck is not None and stuck.startswith("no slot of its annex htcannex-a can run it")
