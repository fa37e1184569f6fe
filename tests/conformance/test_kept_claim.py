"""A chain's next job on the claim its predecessor kept: what htcannex's hop relies on (submitter.py submits
and then asks the schedd to reschedule; description.py sets keep_claim_idle). Runs on every backend
(conftest.py)."""
import htcondor2

from test_behaviours import script, submit, wait_for_event

JobEventType = htcondor2.JobEventType
KEPT = {"MY.TargetAnnexName": '"htcannex-expanse"', "requirements": "(TARGET.AnnexName =?= MY.TargetAnnexName)",
        "keep_claim_idle": "60"}


def test_a_job_queued_after_another_ended_runs_on_the_slot_whose_claim_that_one_kept(backend):
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", "exit 0\n")
    first = submit(backend, directory, executable, **KEPT)
    ran_first = wait_for_event(backend, directory, first, JobEventType.EXECUTE)
    wait_for_event(backend, directory, first, JobEventType.JOB_TERMINATED)
    second = submit(backend, directory, executable, **KEPT)
    backend.schedd.reschedule()
    ran_second = wait_for_event(backend, directory, second, JobEventType.EXECUTE)
    # A real pool's partitionable slot carves a new dynamic slot, with a new name, for every new claim.
    assert ran_second["SlotName"] == ran_first["SlotName"]
    assert wait_for_event(backend, directory, second, JobEventType.JOB_TERMINATED)["ReturnValue"] == 0

