"""What the executor's status check does with one active job: read its record in the event log and
report it to Snakemake (succeeded, failed with what its stderr and the hints say, removed), or hand a
job that is waiting (held, waiting for its annex, idle) to waiting.HeldAndIdle.
"""
from collections.abc import Callable

from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo

from snakemake_executor_plugin_htcannex import secrets
from snakemake_executor_plugin_htcannex.runtime import Runtime
from snakemake_executor_plugin_htcannex.submit.job_spec import missing_products
from snakemake_executor_plugin_htcannex.track import failure_hints
from snakemake_executor_plugin_htcannex.track.event_log import JobPhase, JobRecord
from snakemake_executor_plugin_htcannex.track.tracked_job import WaitingOn, tracked
from snakemake_executor_plugin_htcannex.waiting import HeldAndIdle


class StatusCheck:
    def __init__(self, runtime: Runtime, waiting: HeldAndIdle, succeeded: Callable[[SubmittedJobInfo], None],
                 failed: Callable[..., None]):
        """`succeeded` and `failed`: the executor's report_job_success and report_job_error."""
        self._runtime, self._waiting, self._succeeded, self._failed = runtime, waiting, succeeded, failed

    def still_active(self, job_info: SubmittedJobInfo) -> bool:
        """Act on what the event log says about one job; False once it is reported."""
        waiting = self._waiting
        if tracked(job_info).waiting_on is WaitingOn.ANNEX:
            return waiting.waiting_for_annex(job_info)
        record = self._runtime.tracker.jobs.get(job_info.external_jobid) or waiting.without_event_log(job_info)
        if record is None:
            return True
        if record.ever_started:
            waiting.started(job_info)
        if record.phase is JobPhase.RUNNING:
            tracked(job_info).seen_running()
            return True
        if record.phase is JobPhase.SUCCEEDED:
            # Reported as a success, a job without its outputs would stop the whole run with a
            # traceback (Snakemake's postprocess raises from wait_for_files, --keep-going or not): it
            # fails alone instead. Outputs come back before the job's terminated event; on a shared
            # filesystem Snakemake waits --latency-wait for them itself.
            missing = [] if self._runtime.submit_options.shared_fs else missing_products(job_info.job)
            if missing:
                self._failed(job_info, msg=(
                    f"HTCondor job {record.job_id} exited 0, but these outputs did not come back: "
                    f"{', '.join(missing)}. The job wrote other files than the ones Snakemake expects "
                    f"(HTCondor brings back exactly the listed names). "))
            else:
                self._succeeded(job_info)
            return False
        if record.phase is JobPhase.FAILED:
            self._failed(job_info, msg=self._failure_message(job_info, record))
            return False
        if record.phase is JobPhase.REMOVED:
            self._failed(job_info, msg=f"HTCondor job {record.job_id} was removed: {record.end_reason}. ")
            return False
        if record.phase is JobPhase.HELD:
            return waiting.held(job_info, record)
        return waiting.idle(job_info)

    def _failure_message(self, job_info: SubmittedJobInfo, record: JobRecord) -> str:
        where = f" on annex {record.annex}" if record.annex else ""
        where += f" (slot {record.slot})" if record.slot else ""
        what = (
            f"exited with return value {record.return_value}"
            if record.return_value is not None else record.end_reason
        )
        message = f"HTCondor job {record.job_id}{where} {what}. "
        job = tracked(job_info)
        message += failure_hints.command_output_text(job.stderr, job.spec.logs)
        tail = secrets.redact(failure_hints.command_output(job.stderr, job.spec.logs)[1])
        message += failure_hints.hints(record, tail)
        if failure_hints.killed(record, tail):
            # Most likely an out-of-memory kill (failure_hints.killed): the same request dies the same way,
            # while a larger one shares its node with fewer jobs or goes to a site with more memory.
            message += self._waiting.more_memory_next_time(tracked(job_info).spec, "it was killed asking for")
        return message
