"""The local universe as `htcannex submit` relies on it (driver.py), on every backend: the job runs
in its initial directory (no sandbox), its output is truncated at each start, `on_exit_remove`
requeues it when it was killed by a signal, and `condor_rm` delivers its `remove_kill_sig`."""
from pathlib import Path

import htcondor2

from test_behaviours import JobEventType, events, script, wait_for_event
from waiting import wait_until


def submit_local(backend, directory: Path, executable: str, **commands) -> str:
    description = {"universe": "local", "executable": executable, "initialdir": str(directory),
                   "log": str(directory / "job.log"), "output": "out", "error": "err", **commands}
    result = backend.schedd.submit(htcondor2.Submit(description))
    return f"{result.cluster()}.{result.first_proc()}"


def test_a_local_job_runs_in_its_directory_and_is_requeued_when_killed_by_a_signal(backend):
    directory = backend.submit_dir()
    executable = script(directory, "driver.sh", """\
        pwd > where.txt
        if [ ! -e started-once ]; then touch started-once; echo first start; kill -9 $$; fi
        echo second start
        """)
    job = submit_local(backend, directory, executable, on_exit_remove="ExitBySignal =!= true")
    wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
    kinds = [event.type for event in events(directory, job)]
    assert kinds == [JobEventType.SUBMIT, JobEventType.EXECUTE, JobEventType.JOB_EVICTED,
                     JobEventType.EXECUTE, JobEventType.JOB_TERMINATED]
    assert (directory / "where.txt").read_text().strip() == str(directory)
    assert (directory / "out").read_text() == "second start\n"  # opened anew at each start


def test_removing_a_local_job_sends_its_remove_kill_sig_and_lets_it_end(backend):
    directory = backend.submit_dir()
    executable = script(directory, "driver.sh", """\
        trap 'echo got SIGINT > removed.txt; exit 0' INT
        echo running > running.txt
        while true; do sleep 0.1; done
        """)
    job = submit_local(backend, directory, executable, remove_kill_sig="SIGINT", job_max_vacate_time="30")
    wait_until(lambda: (directory / "running.txt").exists(), backend.patience_s, "the local job to start")
    backend.schedd.act(htcondor2.JobAction.Remove, job, "conformance: remove_kill_sig")
    wait_for_event(backend, directory, job, JobEventType.JOB_ABORTED)
    assert (directory / "removed.txt").read_text() == "got SIGINT\n"
    # The local starter logs the removal as an eviction (jic_local_schedd.cpp), the schedd the abort.
    assert [event.type for event in events(directory, job)][-2:] == [JobEventType.JOB_EVICTED,
                                                                     JobEventType.JOB_ABORTED]
