"""The annex behaviours htcannex relies on, on the embedded pool's annexes and on real ones (`htcondor annex
create` pilots on the realsite harness: backends.real_annexes): what an annex's slot advertises, which jobs
it runs, and what a job and its event log learn of the annex."""
import time

import htcondor2
import pytest
from test_behaviours import events, remove, script, submit, wait_for_event

from backends import REAL_ANNEXES, embedded, real_annexes
from snakemake_executor_plugin_htcannex.sites.matching import live_slots

JobEventType = htcondor2.JobEventType


@pytest.fixture(params=["embedded", "annex"])
def annex_backend(request, tmp_path_factory):
    started = (embedded(tmp_path_factory.mktemp("pool")) if request.param == "embedded"
               else real_annexes(tmp_path_factory.getbasetemp()))
    yield started
    started.stop()


def annex_slots(backend, name: str) -> list:
    return backend.collector.query(htcondor2.AdTypes.Startd, f'AnnexName == "{name}"', [])


def test_an_annex_slot_advertises_its_name_and_htcannex_judges_it_by_the_annex_start(annex_backend):
    for name in REAL_ANNEXES:
        slots = annex_slots(annex_backend, name)
        assert slots, f"no slot of annex {name}"
        assert {slot["AnnexName"] for slot in slots} == {name}
        # A real pilot's slot shows the collector a direct-attach string for START (htcondor_codes.DIRECT_ATTACH_START),
        # the embedded pool's the expression; htcannex's matching judges both by the annex's START.
        for slot in live_slots(annex_backend.collector, name):
            assert "TargetAnnexName" in str(slot.lookup("Start")), slot.lookup("Start")


def test_a_job_runs_on_the_annex_it_targets_and_learns_its_name_from_the_machine_ad(annex_backend):
    directory = annex_backend.submit_dir()
    executable = script(directory, "job.sh", """\
        grep -i '^AnnexName' "$_CONDOR_MACHINE_AD" > machine.txt
        """)
    job = submit(annex_backend, directory, executable, transfer_output_files="machine.txt",
                 **{"MY.TargetAnnexName": '"htcannex-delta"', "ulog_execute_attrs": "AnnexName"})
    executed = wait_for_event(annex_backend, directory, job, JobEventType.EXECUTE)
    terminated = wait_for_event(annex_backend, directory, job, JobEventType.JOB_TERMINATED)
    assert terminated["ReturnValue"] == 0
    assert executed["SlotName"] and executed["ExecuteProps"]["AnnexName"] == "htcannex-delta"
    assert "htcannex-delta" in (directory / "machine.txt").read_text()


def test_the_execute_event_names_the_slot_not_the_annex_unless_the_job_asks(annex_backend):
    directory = annex_backend.submit_dir()
    job = submit(annex_backend, directory, script(directory, "job.sh", "exit 0\n"),
                 **{"MY.TargetAnnexName": '"htcannex-expanse"'})
    executed = wait_for_event(annex_backend, directory, job, JobEventType.EXECUTE)
    assert executed["SlotName"]
    assert "AnnexName" not in executed["ExecuteProps"] and "AnnexName" not in executed


def test_a_job_for_an_annex_that_is_not_up_stays_idle_beside_other_annexes_slots(annex_backend):
    directory = annex_backend.submit_dir()
    job = submit(annex_backend, directory, script(directory, "job.sh", "exit 0\n"),
                 **{"MY.TargetAnnexName": '"htcannex-nowhere"'})
    try:
        wait_for_event(annex_backend, directory, job, JobEventType.SUBMIT)
        time.sleep(annex_backend.negotiation_s)
        assert JobEventType.EXECUTE not in [event.type for event in events(directory, job)]
    finally:
        remove(annex_backend, job)
