"""The Snakemake remote executor: each Snakemake job becomes one HTCondor job.

run_job: adopt the job an earlier (killed) Snakemake submitted for it, if any (track/adoption.py);
else parse its resources once (submit/request.py), place it (sites/placement.py), make sure its
annex is up or coming (annex/; queued held until it is), describe it (submit/description.py) and
submit it off Snakemake's thread (submit/submitter.py). check_active_jobs: read the one event log
(track/event_log.py) and act on each job (status_check.py; waiting.py for one held, waiting for its
annex or idle too long).
"""
import asyncio
import dataclasses
import threading
import time
from typing import AsyncGenerator, Optional

import htcondor2
from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface

from snakemake_executor_plugin_htcannex import schedd as schedd_seam
from snakemake_executor_plugin_htcannex import secrets
from snakemake_executor_plugin_htcannex.annex.manager import AnnexState
from snakemake_executor_plugin_htcannex.ops.plan import plan_report
from snakemake_executor_plugin_htcannex.runtime import Runtime
from snakemake_executor_plugin_htcannex.sites.placement import place
from snakemake_executor_plugin_htcannex.sites.rotation import RotationError
from snakemake_executor_plugin_htcannex.sites.site import SiteKind, SiteRefusal
from snakemake_executor_plugin_htcannex.status_check import StatusCheck
from snakemake_executor_plugin_htcannex.submit import one_step, refusal
from snakemake_executor_plugin_htcannex.submit.description import JobSpec, build_submit, job_signature
from snakemake_executor_plugin_htcannex.submit.direct_command import NeedsSnakemake, direct_command
from snakemake_executor_plugin_htcannex.submit.job_spec import JobCommand, job_spec, rule_label, wildcards_of
from snakemake_executor_plugin_htcannex.submit.prepared_scripts import PreparedScripts
from snakemake_executor_plugin_htcannex.submit.request import job_request, with_memory
from snakemake_executor_plugin_htcannex.submit.submitter import Submitter
from snakemake_executor_plugin_htcannex.submit.template import TemplateError
from snakemake_executor_plugin_htcannex.submit_language import SubmitValueError
from snakemake_executor_plugin_htcannex.track.adoption import Adoption, CompletedWhileDown
from snakemake_executor_plugin_htcannex.track.liveness import ScheddWatch, silence_s
from snakemake_executor_plugin_htcannex.track.log_writes import LogWrites
from snakemake_executor_plugin_htcannex.track.tracked_job import TrackedJob, WaitingOn, tracked
from snakemake_executor_plugin_htcannex.waiting import HeldAndIdle

# How often the status thread looks whether the event log grew: without inotify (log_writes.py), and where
# inotify watches the log and a write wakes the thread at once, for a log it does not see written (another
# machine's writes onto a network filesystem). Each look costs CPU: every 10 ms, ~24 ms per second of a run.
NEWS_CHECK_S = 0.01
WATCHED_NEWS_CHECK_S = 0.25
# Above this many active jobs, a job's end waits NEWS_CHECK_S for others before it ends the status thread's
# wait: each end reported alone gets its own round of Snakemake's status check, which costs O(active jobs)
# (with 300 queued no-op jobs +1.4 ms of Snakemake's CPU per job), where one round reports those that ended
# meanwhile.
WAKE_ON_WRITE_JOBS = 16

class Executor(RemoteExecutor):
    def __init__(self, workflow, logger):
        # RemoteExecutor.__init__ starts the status thread before __post_init__,
        # and that thread calls check_active_jobs at once: it must find this.
        self._runtime: Optional[Runtime] = None
        self._submitter: Optional[Submitter] = None
        # HTCondor job ids submitted or adopted and not yet reported, with the script each runs (or
        # None): what Ctrl-C removes. Snakemake's own list leaves out the jobs the status thread is
        # looking at when the signal comes.
        self._unreported: dict[str, Optional[str]] = {}
        self._log_writes: Optional[LogWrites] = None
        self._shut_down = False
        super().__init__(workflow, logger)

    def __post_init__(self):
        runtime = Runtime.open(self.workflow.executor_settings, self.workflow, self.logger)
        self._watch = ScheddWatch(runtime.connection.schedd,
                                  silence_s(self.next_seconds_between_status_checks, runtime.connection.embedded),
                                  runtime.connection.embedded, self.logger)
        self._submitter = Submitter(runtime.connection.schedd)
        self._scripts = PreparedScripts(runtime.submit_options.workdir, self.workflow.execution_settings.cleanup_scripts)
        self._adoption = Adoption(runtime.connection.schedd, runtime.config.sites, self.workflow, self.logger,
                                  self._scripts)
        self._adoption.remove_stale_scripts()  # before this run prepares any
        self._held_and_idle = HeldAndIdle(runtime, self.logger, self.workflow.executor_settings.unmatchable,
                                          self.report_job_error)
        self._status_check = StatusCheck(runtime, self._held_and_idle, self.report_job_success, self.report_job_error)
        self._log_writes = LogWrites(runtime.tracker.path)
        self._runtime = runtime  # the status thread starts checking jobs with this
        # A run with nothing to do returns without shutting its executor down (Workflow.execute), and
        # the status thread would meet the interpreter's shutdown mid-poll ("cannot schedule new
        # futures after shutdown"). Registered after concurrent.futures' own exit hook, this runs
        # before it, as threading runs these hooks last registered first.
        threading._register_atexit(self._shutdown_unless_done)
        if self._runtime.withheld_secrets:
            self.logger.warning(secrets.withheld_warning(self._runtime.withheld_secrets))
        if self._runtime.unlisted_sources:
            self.logger.info("Jobs that run Snakemake also get these files, which the Snakefile imports or a "
                             "run: block names but Snakemake does not list as workflow sources: "
                             + ", ".join(self._runtime.unlisted_sources))
        self._print_plan()

    # -- Snakemake's hooks ---------------------------------------------------

    def get_python_executable(self):
        return self._runtime.job_python

    def additional_general_args(self) -> str:
        # Without a common working directory Snakemake hands spawned jobs the
        # submit side's --directory; an HTCondor job must stay in its sandbox,
        # where file transfer put the inputs at their relative paths.
        directory = "" if self._runtime.submit_options.shared_fs else "--directory ."
        return " ".join(filter(None, (directory, self._in_job_shadow_prefix(),
                                      one_step.in_job_rerun_triggers(self.workflow))))

    def _in_job_shadow_prefix(self) -> str:
        """`--shadow-prefix .snakemake` unless the user chose one: shadow directories under the job's
        .snakemake, where a local run has them. Without it a remote job's Snakemake puts them in its
        persistence directory under $TMPDIR, and an execute point's TMPDIR is the job's sandbox, the
        working directory that `shadow: "full"` copies (os.walk skips only .snakemake): the shadow
        directory was copied into itself until the path was too long (errno 36)."""
        if self._runtime.submit_options.shared_fs or self.workflow.execution_settings.shadow_prefix:
            return ""
        return "--shadow-prefix .snakemake"

    def get_job_args(self, job: JobExecutorInterface, **kwargs) -> str:
        # The job's own Snakemake runs its step only, whatever mtimes the sandbox has (one_step.py).
        return f"{super().get_job_args(job, **kwargs)} {one_step.in_job_args(job, self.workflow)}"

    def run_jobs(self, jobs: list[JobExecutorInterface]):
        # The jobs of one hand-over share submits where they can (submit/submitter.py).
        with self._submitter.handing_over():
            super().run_jobs(jobs)

    def run_job(self, job: JobExecutorInterface):
        spec, command = self._job_spec(job)
        if self._adopt(job, spec) or not self._submit(job, spec, command):
            # Adopted (that submission runs the script prepared for it then), or not queued.
            self._scripts.remove(command.prepared_script)

    def _submit(self, job: JobExecutorInterface, spec: JobSpec, command: JobCommand) -> bool:
        """Place and describe the job and hand it to the submitter; False (the job reported failed)
        when it cannot be described. The schedd's answer comes later, from the submitter's thread."""
        runtime = self._runtime
        # Feasibility first (placement.py): a job no site can run fails alone, before any annex is
        # requested or anything submitted; the rest of the run goes on.
        try:
            request = job_request(spec.rule, spec.resources, spec.threads)  # its resources, parsed once
            decision = place(runtime.config.rotation, runtime.config.sites, job.name, wildcards_of(job),
                             job.attempt, request)
            site = decision.site
            if decision.impossible:
                raise SiteRefusal(decision.impossible)
            submit = build_submit(spec, decision, runtime.submit_options)
        except (RotationError, SubmitValueError, SiteRefusal, TemplateError) as error:
            refusal.make_final(job)  # a retry is refused the same way
            self.report_job_error(SubmittedJobInfo(job), msg=f"{error} ")
            return False
        for skip in decision.skipped:
            self.logger.info(f"Job {job.jobid} skips site {skip.site}: {skip.reason}")
        hold_for_annex = site is not None and site.kind is SiteKind.ANNEX and not runtime.annexes.is_up(site)
        waiting_on = WaitingOn.ANNEX if hold_for_annex else WaitingOn.NOTHING
        if hold_for_annex:
            # HTCondor creates an annex only for a user with a job queued for it: queue it held first.
            submit["hold"] = "true"

        def submitted(result):
            if hold_for_annex:
                status = runtime.annexes.ensure(site)
                if status.state is AnnexState.NEEDS_USER:
                    self.logger.warning(status.message)  # the user has to act
                elif status.message:
                    self.logger.info(status.message)
            job_id = f"{result.cluster()}.{result.first_proc()}"
            where = f" on {site.name}" if site else ""
            self.logger.info(f"Submitted job {job.jobid} as HTCondor job {job_id}{where}"
                             + (" (held until its annex is up)" if hold_for_annex else ""))
            self._track(job, TrackedJob(spec, site, waiting_on, submit.get("error"), command.prepared_script,
                                        request, decision.request), job_id)

        def refused(error: Exception):  # htcondor2.HTCondorException, the embedded pool's PoolRequestError
            self._scripts.remove(command.prepared_script)
            self.report_job_error(SubmittedJobInfo(job), msg=f"The schedd refused to queue job {job.jobid}: "
                                                            f"{secrets.redact(str(error))} ")

        # Off Snakemake's main thread (submit/submitter.py); the schedd's answer comes back through these.
        self._submitter.submit(submit, submitted, refused)
        return True

    def _track(self, job: JobExecutorInterface, tracked_job: TrackedJob, job_id: str) -> None:
        self._unreported[job_id] = tracked_job.prepared_script
        self.report_job_submission(SubmittedJobInfo(job, external_jobid=job_id, aux={"htcannex": tracked_job}))

    def _adopt(self, job: JobExecutorInterface, spec: JobSpec) -> bool:
        """Take over the job an earlier (killed) Snakemake submitted for the same outputs instead of
        submitting it again (adoption.py); False when there is none."""
        earlier = self._adoption.earlier_submission(job, job_signature(spec, self._runtime.submit_options))
        if isinstance(earlier, CompletedWhileDown):
            # Not tracked: nothing is left to wait for (Snakemake checks the outputs and clears its marker).
            self.report_job_success(SubmittedJobInfo(job, external_jobid=earlier.job_id))
        elif earlier is not None:
            self._track(job, TrackedJob(spec, earlier.site, earlier.waiting_on, earlier.stderr, earlier.prepared_script),
                        earlier.job_id)
        return earlier is not None

    async def check_active_jobs(
        self, active_jobs: list[SubmittedJobInfo]
    ) -> AsyncGenerator[SubmittedJobInfo, None]:
        runtime = self._runtime
        if runtime is None or not active_jobs:
            for job_info in active_jobs:
                yield job_info
            return
        # No status_rate_limiter (--max-status-checks-per-second, 10 by default): it spares a
        # scheduler from queries, and this reads one local file; throttled, a chain of short
        # jobs stalls for most of a second after every tenth poll.
        if runtime.tracker.poll():
            self._watch.heard()
        if not self._watch.probe():
            for job_info in active_jobs:  # the schedd does not answer: nothing changes until it does
                yield job_info
            return
        # One collector query and ledger read for all jobs waiting on annexes; one collector answer for all
        # idle jobs looked at in this poll, and one schedd query for every job's state when there is no event log.
        runtime.annexes.new_poll()
        self._held_and_idle.new_poll(active_jobs)
        for job_info in active_jobs:
            try:
                active = self._status_check.still_active(job_info)
            except schedd_seam.UNANSWERED as error:
                self._watch.unanswered(error)
                active = True
            if active:
                yield job_info
            else:
                self._unreported.pop(job_info.external_jobid, None)
                self._scripts.remove(tracked(job_info).prepared_script)

    async def sleep(self):
        """Wait until the event log says a job finished or was held, at most
        --seconds-between-status-checks.

        A poll reads only the one local event log (no schedd query), so it can follow
        the log closely: a finished job is reported as soon as its events are written where
        inotify watches the log (log_writes.py), else within NEWS_CHECK_S, instead of up to a
        whole status interval later, which is what a chain of short jobs waits on.
        The news is read here, and only a job to report or decide on ends the wait: every
        job also logs its submit, input transfer, start and output transfer, and a status
        check for each (Snakemake's round of its active jobs, through its lock and a thread
        pool) cost more CPU than the job's own Snakemake bookkeeping."""
        deadline = time.monotonic() + self.next_seconds_between_status_checks
        while (left := deadline - time.monotonic()) > 0:
            if self._runtime is not None and self._runtime.tracker.has_news():
                tracker = self._runtime.tracker
                changed = tracker.poll()
                if changed:
                    self._watch.heard()
                if any(tracker.jobs[job_id].phase.wants_attention for job_id in changed):
                    if len(self.active_jobs) > WAKE_ON_WRITE_JOBS:
                        await asyncio.sleep(NEWS_CHECK_S)  # the jobs that end meanwhile share the round
                    return
            if self._log_writes is None:
                await asyncio.sleep(min(left, NEWS_CHECK_S))
            else:  # it starts watching once the log exists
                await self._log_writes.wait(min(left, WATCHED_NEWS_CHECK_S if self._log_writes.watching
                                                else NEWS_CHECK_S))

    def print_job_error(self, job_info: SubmittedJobInfo, msg=None, **kwargs):
        job = job_info.job
        if not job.is_group():
            if withheld := refusal.withheld_report(job, msg):
                return self.logger.error(withheld)
            return super().print_job_error(job_info, msg, **kwargs)
        # Snakemake's GroupJob.log_error drops `msg` and has each member job say "message: None":
        # the group's failure is said once here, and each member points to it.
        group = f"group job {job.jobid} (rules {rule_label(job)})"
        self.logger.error(f"Error in {group}: {msg or 'it failed'}")
        for member in sorted(job.jobs, key=lambda member: member.rule.name):
            note = f"failed with its {group}, see above"
            if withheld := refusal.withheld_report(member, note):
                self.logger.error(withheld)
            else:
                member.log_error(note, indent=True, **kwargs)

    def cancel(self):
        # Jobs still being submitted are submitted first, so that cancelling removes them too.
        self._stop_submitting()
        super().cancel()

    def cancel_jobs(self, active_jobs: list[SubmittedJobInfo]):
        # Ctrl-C must end the run whatever the schedd does: jobs that have just left the queue are
        # no error (the schedd counts them not found), and a schedd that does not answer is said.
        ids = sorted({job_info.external_jobid for job_info in active_jobs} | self._unreported.keys())
        if not ids or self._runtime is None:
            return
        try:
            self._runtime.connection.schedd.act(htcondor2.JobAction.Remove, ids, reason="Snakemake was cancelled")
        except schedd_seam.UNANSWERED as error:
            # Their scripts stay: the jobs may still run (the next run removes them once they have left).
            self.logger.error(f"Could not remove HTCondor job(s) {', '.join(ids)}: {error}. They may still be "
                              "queued: remove them (condor_rm) once the schedd answers again")
            return
        self._scripts.remove(*(tracked(job_info).prepared_script for job_info in active_jobs),
                             *self._unreported.values())

    def shutdown(self):
        self._shut_down = True
        self._stop_submitting()
        super().shutdown()
        if self._runtime is not None:
            # The run is over (done, failed or cancelled): no annex it requested idles on an allocation.
            for said in self._runtime.annexes.release():
                self.logger.info(said)
            self._runtime.tracker.close()
            self._log_writes.close()

    # -- helpers ---------------------------------------------------------------

    def _shutdown_unless_done(self) -> None:
        if not self._shut_down:
            self.shutdown()

    def _stop_submitting(self) -> None:
        if self._submitter is not None:  # None: __post_init__ failed before there was one
            self._submitter.stop()

    def _job_spec(self, job: JobExecutorInterface) -> tuple[JobSpec, JobCommand]:
        runtime = self._runtime
        command = self._command(job)
        spec = job_spec(job, command, runtime.submit_options,
                        str(self.workflow.storage_settings.remote_job_local_storage_prefix))
        floor = self._held_and_idle.memory_floor(spec)
        if floor is not None and spec.resources.get("mem_mb", 0) < floor:
            spec = dataclasses.replace(spec, resources=with_memory(spec.resources, floor))
        return spec, command

    def _command(self, job: JobExecutorInterface) -> JobCommand:
        """The rule's own command or script without Snakemake in the job where it can (direct_command.py),
        else Snakemake's."""
        if self._runtime.direct_commands:
            try:
                return direct_command(job, self.workflow, self._runtime.submit_options, self.get_python_executable())
            except NeedsSnakemake as why:
                self.logger.debug(f"Job {job.jobid} (rule {job.name}) runs Snakemake in its HTCondor job: {why}")
        # format_job_exec() is a shell command (it may `export` variables and
        # chain with &&), quoted for a shell: hand it to one, never re-quote it.
        return JobCommand("/bin/sh", self.format_job_exec(job))

    def _print_plan(self) -> None:
        jobs = [(job.name, wildcards_of(job), job.resources, job.threads)
                for job in self.workflow.dag.needrun_jobs() if not job.is_group()]
        try:
            plan = plan_report(self._runtime.config, jobs, self._runtime.annexes.ledger.spent_core_hours())
        except RotationError as error:
            raise WorkflowError(str(error)) from error
        if plan:
            self.logger.info(plan)
