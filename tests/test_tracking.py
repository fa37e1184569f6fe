"""Event-log tracking: each event type, incremental reads, and the hold policy.

The logs are written in HTCondor's user-log text format and parsed by the real
`htcondor2.JobEventLog`, exactly as the pool or a real schedd would write them.
"""
import time
from types import SimpleNamespace

import htcondor2._job_event_log
import pytest

from event_log_text import aborted, evicted, execute, held, released, submit, terminated
from snakemake_executor_plugin_htcannex.track.event_log import (
    EventLogTracker,
    HoldPolicy,
    JobPhase,
)

@pytest.fixture
def log(tmp_path):
    path = tmp_path / "jobs.log"

    def append(*events):
        with path.open("a") as handle:
            handle.write("".join(events))

    append.path = path
    return append


def test_missing_log_is_no_news(tmp_path):
    tracker = EventLogTracker(tmp_path / "jobs.log")
    assert tracker.poll() == set()


def test_a_poll_never_waits_for_the_next_event(log, monkeypatch):
    """Just after a second begins, the C library's time() can still read the second before while
    time.time() reads the new one; a poll must not then wait for the next event (it waited up to 1 s)."""
    monkeypatch.setattr(htcondor2._job_event_log, "time", SimpleNamespace(time=lambda: time.time() + 1))
    log(submit("001.000"))
    tracker = EventLogTracker(log.path)
    started = time.monotonic()
    assert tracker.poll() == {"1.0"}
    assert tracker.poll() == set()
    assert time.monotonic() - started < 0.5


def test_success_and_annex_of_execute(log):
    tracker = EventLogTracker(log.path)
    log(submit("001.000"), execute("001.000", "slot1@expanse-a", "expanse-a"))
    assert tracker.poll() == {"1.0"}
    record = tracker.jobs["1.0"]
    assert record.phase is JobPhase.RUNNING
    assert record.annex == "expanse-a"
    assert record.slot == "slot1@expanse-a"
    log(terminated("001.000", 0))
    assert tracker.poll() == {"1.0"}
    assert tracker.jobs["1.0"].phase is JobPhase.SUCCEEDED


def test_reads_only_appended_events(log):
    tracker = EventLogTracker(log.path)
    log(submit("001.000"))
    tracker.poll()
    assert tracker.poll() == set()
    log(submit("002.000"))
    assert tracker.poll() == {"2.0"}


def test_nonzero_return_value_fails(log):
    tracker = EventLogTracker(log.path)
    log(submit("003.000"), execute("003.000", "slot1@delta-a", "delta-a"), terminated("003.000", 3))
    tracker.poll()
    record = tracker.jobs["3.0"]
    assert record.phase is JobPhase.FAILED
    assert record.return_value == 3


def test_hold_release_evict_abort(log):
    tracker = EventLogTracker(log.path)
    log(submit("004.000"), held("004.000", 13, 2))
    tracker.poll()
    record = tracker.jobs["4.0"]
    assert (record.phase, record.hold_code, record.hold_subcode) == (JobPhase.HELD, 13, 2)
    assert "x not found" in record.hold_reason
    log(released("004.000"))
    tracker.poll()
    assert record.phase is JobPhase.IDLE and record.hold_code is None
    log(execute("004.000", "slot1@aws-a", "aws-a"), evicted("004.000"))
    tracker.poll()
    assert record.phase is JobPhase.IDLE and record.annex is None and record.ever_started
    log(aborted("004.000"))
    tracker.poll()
    assert record.phase is JobPhase.REMOVED and record.end_reason == "removed by user"


def test_transient_hold_released_a_bounded_number_of_times(log):
    tracker = EventLogTracker(log.path)
    policy = HoldPolicy("release-transient", max_releases=2)
    log(submit("005.000"), held("005.000", 13, 110))
    tracker.poll()
    record = tracker.jobs["5.0"]
    assert policy.decide(record, "train").release
    assert policy.decide(record, "train").release
    final = policy.decide(record, "train")
    assert not final.release
    assert "again after 2 release(s)" in final.message
    assert "5.0" in final.message and "rule train" in final.message


@pytest.mark.parametrize("code, subcode, reason", [
    (34, 102, "Memory usage exceeded request"),  # cgroups enforce request_memory
    (34, 0, "Memory usage exceeded request"),  # older HTCondor, when code 34 meant memory only
    (26, 0, "memory usage 411 MB exceeded request_memory 100 MB"),  # SYSTEM_PERIODIC_HOLD, as on realpool
    (21, 102, "The startd put this job on hold."),  # an execute point's WANT_HOLD
])
def test_memory_hold_of_every_kind_fails_with_the_fix(log, code, subcode, reason):
    tracker = EventLogTracker(log.path)
    log(submit("006.000"), held("006.000", code, subcode, reason=reason))
    tracker.poll()
    record = tracker.jobs["6.0"]
    decision = HoldPolicy().decide(record, "train_chunk")
    assert not decision.release and record.hold.needs_more_memory
    assert reason in decision.message
    assert "mem_mb=lambda wildcards, attempt" in decision.message


def test_a_policy_hold_on_something_else_is_not_a_memory_hold(log):
    tracker = EventLogTracker(log.path)
    log(submit("017.000"), held("017.000", 26, 0, reason="The job restarted more than 10 times"))
    tracker.poll()
    record = tracker.jobs["17.0"]
    assert not record.hold.needs_more_memory and "mem_mb" not in HoldPolicy().decide(record, "r").message


def test_output_permission_hold_says_the_submit_dir_is_not_writable(log):
    tracker = EventLogTracker(log.path)
    log(submit("018.000"), held("018.000", 12, 13, reason="Transfer output files failure: Permission denied"))
    tracker.poll()
    decision = HoldPolicy("release-transient").decide(tracker.jobs["18.0"], "train_chunk")
    assert not decision.release  # the directory stays unwritable: a release fails the same way
    assert "not writable by the user the job runs as" in decision.message


def test_disk_hold_asks_for_disk_not_memory(log):
    tracker = EventLogTracker(log.path)
    log(submit("016.000"), held("016.000", 34, 104, reason="Job has exceeded its disk allocation"))
    tracker.poll()
    message = HoldPolicy().decide(tracker.jobs["16.0"], "train_chunk").message
    assert "disk_mb=lambda wildcards, attempt" in message and "mem_mb" not in message


def test_102_is_a_subcode_not_a_hold_code(log):
    tracker = EventLogTracker(log.path)
    log(submit("026.000"), held("026.000", 102, 0, reason="some site's own hold"))
    tracker.poll()
    assert "mem_mb" not in HoldPolicy().decide(tracker.jobs["26.0"], "train_chunk").message


def test_fail_policy_fails_transfer_holds_too(log):
    tracker = EventLogTracker(log.path)
    log(submit("007.000"), held("007.000", 12, reason="Transfer output files failure"))
    tracker.poll()
    assert not HoldPolicy("fail").decide(tracker.jobs["7.0"], "r").release


def test_own_submit_on_hold_is_not_a_failure(log):
    tracker = EventLogTracker(log.path)
    log(submit("008.000"), held("008.000", 15, reason="submitted on hold"))
    tracker.poll()
    assert HoldPolicy("fail").decide(tracker.jobs["8.0"], "r") is None


def test_unknown_hold_policy_names_the_setting():
    with pytest.raises(ValueError, match="htcannex-hold-policy"):
        HoldPolicy("keep-forever")


def test_missing_output_is_a_failed_command_not_a_transient_hold(log):
    tracker = EventLogTracker(log.path)
    reason = "Transfer output files failure: reading from file chunk1.pt: (errno 2) No such file"
    log(submit("009.000"), held("009.000", 12, 2, reason=reason))
    tracker.poll()
    decision = HoldPolicy("release-transient").decide(tracker.jobs["9.0"], "train_chunk")
    assert not decision.release
    assert "command most likely failed" in decision.message and "chunk1.pt" in decision.message


@pytest.mark.parametrize("subcode, reason", [
    # known by its reason text, whatever errno a transfer plugin gives (here 2, as for a missing file) ...
    (2, "Transfer output files failure: reading from file ckpt-2.pt: the OSDF object "
        "ospool/run0/ckpt-2.pt already exists, and OSDF objects are immutable: write a new name"),
    # ... and by the errno a refused overwrite carries (EEXIST), as the embedded pool holds it
    (17, "Transfer output files failure: ckpt-2.pt: File exists"),
])
def test_output_over_an_existing_osdf_object_is_not_released_and_says_rename(log, subcode, reason):
    tracker = EventLogTracker(log.path)
    log(submit("010.000"), held("010.000", 12, subcode, reason=reason))
    tracker.poll()
    decision = HoldPolicy("release-transient").decide(tracker.jobs["10.0"], "train_chunk")
    assert not decision.release  # the object is still there: a release fails the same way
    assert "immutable" in decision.message and "new name" in decision.message
    assert "delete or rename the object at the origin" in decision.message
    assert "command most likely failed" not in decision.message
