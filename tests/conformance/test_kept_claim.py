"""A chain's next job, queued after its predecessor ended: what htcannex's hop relies on (htcondor2's submit
sends the schedd a RESCHEDULE, and waiting.py asks for one more when the job is still idle; description.py sets
keep_claim_idle)."""
import htcondor2

from test_behaviours import script, submit, wait_for_event

JobEventType = htcondor2.JobEventType
KEPT = {"MY.TargetAnnexName": '"htcannex-expanse"', "requirements": "(TARGET.AnnexName =?= MY.TargetAnnexName)",
        "keep_claim_idle": "60"}


def one_after_the_other(backend) -> tuple[str, str]:
    """Two jobs for one annex, the second queued once the first has ended and followed by a reschedule."""
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", "exit 0\n")
    first = submit(backend, directory, executable, **KEPT)
    wait_for_event(backend, directory, first, JobEventType.JOB_TERMINATED)
    second = submit(backend, directory, executable, **KEPT)
    backend.schedd.reschedule()
    assert wait_for_event(backend, directory, second, JobEventType.JOB_TERMINATED)["ReturnValue"] == 0
    return first, second


def test_a_job_queued_after_a_reschedule_runs(backend):
    one_after_the_other(backend)


def test_on_htcondor_the_next_job_runs_on_the_claim_its_predecessor_kept(htcondor):
    first, second = one_after_the_other(htcondor)
    claims = {}
    for job in (first, second):
        cluster, proc = job.split(".")
        [ad] = htcondor.schedd.history(f"ClusterId == {cluster} && ProcId == {proc}", ["LastPublicClaimId"], 1)
        claims[job] = ad["LastPublicClaimId"]
    # Without keep_claim_idle the schedd relinquishes the claim when the first job ends, and the second runs on a
    # claim of its own, after a negotiation cycle.
    assert claims[first] == claims[second]
