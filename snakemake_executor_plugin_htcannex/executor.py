"""The Snakemake remote executor: each Snakemake job becomes one HTCondor job.

run_job: place the job (rotation), make sure its annex is up or coming
(annex.py; held until it is), describe it (description.py) and submit it
through the schedd seam. check_active_jobs: read the one event log
(tracking.py) and turn events into Snakemake's success/error callbacks.
"""
import asyncio
import dataclasses
import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import AsyncGenerator, Optional

import htcondor2
from htcondor_codes import JobStatus
from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface

from . import direct_shell, one_step, osdf_transfer, paths, recovery, secrets
from . import schedd as schedd_seam
from .annex import AnnexLedger, AnnexManager, AnnexState, EmbeddedBackend, HtcondorCliBackend
from .catalogue import Catalogue, HtcannexConfigError, load_catalogue
from .description import JobSpec, SubmitOptions, build_submit, job_signature, resource_request, transfer_root
from .holds import Hold, memory_for_retry
from .rotation import RotationError, plan_report
from .site import SiteRefusal
from .submit_values import SubmitValueError
from .tracking import EventLogTracker, HoldPolicy, JobPhase, JobRecord
from .units import UnitError, parse_duration_s

STDERR_TAIL_LINES = 20
NEWS_CHECK_S = 0.01  # how often the status thread looks whether the event log grew
# How long after a submit a missing event log means HTCondor cannot write it (then the schedd is asked).
NO_EVENT_LOG_GRACE_S = 10.0
# HTCondor starts jobs with no PATH; the spawned Snakemake (its ILP scheduler
# included) and the rules' shell commands need one.
EXECUTE_POINT_PATH = "/usr/local/bin:/usr/bin:/bin"
# A job runs a whole Snakemake process (~150 MB resident) besides the rule's
# command, and HTCondor enforces request_memory on both together: a rule's
# mem_mb gets this much on top, and a job without mem_mb/disk_mb gets
# Snakemake's own "full" defaults instead of the pool's (128 MB on many pools).
SPAWNED_SNAKEMAKE_MB = 256
COMMAND_NOT_FOUND = 127  # a POSIX shell's exit status for a command it cannot find
MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
SPAWNED_SNAKEMAKE_DEFAULTS = {"mem_mb": 1000, "disk_mb": 1000}


class Executor(RemoteExecutor):
    def __init__(self, workflow, logger):
        # RemoteExecutor.__init__ starts the status thread before __post_init__,
        # and that thread calls check_active_jobs at once: it must find this.
        self._runtime: Optional[_Runtime] = None
        # job signature -> the memory (MB) its next attempt asks for at least, after a memory hold
        self._memory_floor: dict[str, int] = {}
        self._warned_no_event_log = False
        super().__init__(workflow, logger)

    def __post_init__(self):
        self._runtime = _Runtime.open(self.workflow.executor_settings, self.workflow)
        self._left_in_queue = recovery.QueuedJobs(self._runtime.connection.schedd)
        self._finished_while_down = recovery.FinishedJobs(self._runtime.connection.schedd, self._marked_job_ids)
        if self._runtime.withheld_secrets:
            self.logger.warning(secrets.withheld_warning(self._runtime.withheld_secrets))
        self._print_plan()

    # -- Snakemake's hooks ---------------------------------------------------

    def get_python_executable(self):
        # The embedded pool's execute points are this machine: use this Python.
        if self._runtime is not None and self._runtime.connection.pool is not None:
            return sys.executable
        return super().get_python_executable()

    def additional_general_args(self) -> str:
        # Without a common working directory Snakemake hands spawned jobs the
        # submit side's --directory; an HTCondor job must stay in its sandbox,
        # where file transfer put the inputs at their relative paths.
        directory = "" if self._runtime.submit_options.shared_fs else "--directory ."
        return f"{directory} {one_step.in_job_rerun_triggers(self.workflow)}".strip()

    def get_job_args(self, job: JobExecutorInterface, **kwargs) -> str:
        # The job's own Snakemake runs its step only, whatever mtimes the sandbox has (one_step.py).
        return f"{super().get_job_args(job, **kwargs)} {one_step.in_job_args(job, self.workflow)}"

    def run_job(self, job: JobExecutorInterface):
        runtime = self._runtime
        spec = self._job_spec(job)
        if self._adopt(job, spec):
            return
        try:
            placement = runtime.config.rotation.place(job.name, _wildcards_of(job), job.attempt)
        except RotationError as error:
            raise WorkflowError(str(error)) from error
        site = runtime.config.sites[placement.site] if placement.site else None
        hold_for_annex = False
        if site is not None and site.kind == "annex":
            status = runtime.annexes.ensure(site)
            hold_for_annex = status.state is not AnnexState.UP
            if status.state is AnnexState.WAITING:
                self.logger.warning(status.message)  # the user has to act
            elif status.message:
                self.logger.info(status.message)
        try:
            submit = build_submit(spec, site, runtime.submit_options)
        except (SubmitValueError, SiteRefusal) as error:
            raise WorkflowError(str(error)) from error
        if hold_for_annex:
            # HTCondor creates an annex only for a user with a job queued for it.
            submit["hold"] = "true"
        result = runtime.connection.schedd.submit(submit)
        job_id = f"{result.cluster()}.{result.first_proc()}"
        where = f" on {site.name}" if site else ""
        self.logger.info(f"Submitted job {job.jobid} as HTCondor job {job_id}{where}"
                         + (" (held until its annex is up)" if hold_for_annex else ""))
        self._track(job, job_id, site, hold_for_annex, stderr=submit.get("error"), spec=spec)

    def _track(self, job: JobExecutorInterface, job_id: str, site, held_for_annex: bool, stderr,
               spec: JobSpec) -> None:
        self.report_job_submission(SubmittedJobInfo(
            job, external_jobid=job_id,
            aux={
                "site": site,
                "held_for_annex": held_for_annex,
                "waiting_since": time.time(),
                "stderr": stderr,  # relative to the submit directory, here
                "spec": spec,
            },
        ))

    def _adopt(self, job: JobExecutorInterface, spec: JobSpec) -> bool:
        """Track the job an earlier (killed) Snakemake submitted for the same outputs instead of
        submitting it again; False when there is none."""
        runtime = self._runtime
        signature = job_signature(spec.rule, spec.outputs, runtime.submit_options.workdir)
        ad, surplus = self._left_in_queue.take(signature)
        if ad is None:
            return self._adopt_finished(job, signature)
        if surplus:
            self._remove(surplus, f"duplicate of HTCondor job {recovery.job_id(ad)}")
        site = runtime.config.sites.get(ad.get("HtcannexSite"))
        held_for_annex = (ad["JobStatus"] == JobStatus.HELD
                          and Hold(ad.get("HoldReasonCode"), ad.get("HoldReasonSubCode")).ours)
        self.logger.info(f"Adopted HTCondor job {recovery.job_id(ad)} for job {job.jobid}: it was submitted "
                         "before Snakemake restarted and is still queued, so it is not submitted again")
        self._track(job, recovery.job_id(ad), site, held_for_annex, stderr=ad.get("Err"), spec=spec)
        return True

    def _adopt_finished(self, job: JobExecutorInterface, signature: str) -> bool:
        """Report as done the job an earlier (killed) Snakemake submitted that completed while it was
        down, when its outputs are here; False when there is none."""
        # Snakemake's own incomplete marker names the submission (the persistence API that
        # dag.incomplete_external_jobid reads; that one says None under --rerun-incomplete, the
        # only way Snakemake runs a job whose outputs are marked incomplete).
        ad = self._finished_while_down.completed(self.workflow.persistence.external_jobids(job), signature)
        if ad is None or not all(os.path.exists(product) for product in _products(job) if not product.is_storage):
            return False
        # Its storage (osdf://) outputs went up before it completed: a failed upload holds the job.
        self.logger.info(f"Adopted HTCondor job {recovery.job_id(ad)} for job {job.jobid}: it completed (exit code 0) "
                         "while Snakemake was down and its outputs are here, so it is not submitted again")
        # Not tracked: nothing is left to wait for (Snakemake checks the outputs and clears its marker).
        self.report_job_success(SubmittedJobInfo(job, external_jobid=recovery.job_id(ad)))
        return True

    def _marked_job_ids(self) -> list:
        """The HTCondor job ids Snakemake's incomplete markers hold for the jobs this run needs."""
        persistence = self.workflow.persistence
        return [job_id for job in self.workflow.dag.needrun_jobs() for job_id in persistence.external_jobids(job)]

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
        runtime.tracker.poll()
        for job_info in active_jobs:
            if self._still_active(job_info):
                yield job_info

    async def sleep(self):
        """Wait until the event log grows, at most --seconds-between-status-checks.

        A poll reads only the one local event log (no schedd query), so it can follow
        the log closely: a finished job is reported within NEWS_CHECK_S instead of up to
        a whole status interval later, which is what a chain of short jobs waits on."""
        deadline = time.monotonic() + self.next_seconds_between_status_checks
        while time.monotonic() < deadline:
            if self._runtime is not None and self._runtime.tracker.has_news():
                return
            await asyncio.sleep(NEWS_CHECK_S)

    def cancel_jobs(self, active_jobs: list[SubmittedJobInfo]):
        ids = [job_info.external_jobid for job_info in active_jobs]
        if ids and self._runtime is not None:
            self._runtime.connection.schedd.act(
                htcondor2.JobAction.Remove, ids, reason="Snakemake was cancelled"
            )

    def shutdown(self):
        super().shutdown()
        if self._runtime is not None:
            self._runtime.tracker.close()

    # -- helpers ---------------------------------------------------------------

    def _still_active(self, job_info: SubmittedJobInfo) -> bool:
        """Act on what the event log says about one job; False once it is reported."""
        runtime = self._runtime
        aux = job_info.aux
        if aux["held_for_annex"]:
            return self._wait_for_annex(job_info)
        record = runtime.tracker.jobs.get(job_info.external_jobid) or self._held_without_event_log(job_info)
        if record is None or record.phase is JobPhase.RUNNING:
            return True
        rule = job_info.job.name
        if record.phase is JobPhase.SUCCEEDED:
            self.report_job_success(job_info)
            return False
        if record.phase is JobPhase.FAILED:
            self.report_job_error(job_info, msg=self._failure_message(job_info, record))
            return False
        if record.phase is JobPhase.REMOVED:
            self.report_job_error(
                job_info, msg=f"HTCondor job {record.job_id} was removed: {record.end_reason}. "
            )
            return False
        if record.phase is JobPhase.HELD:
            decision = runtime.hold_policy.decide(record, rule)
            if decision is None:
                return True
            # A hold reason may quote a URL with its token (osdf://...?authz=...).
            message = secrets.redact(decision.message)
            if decision.release:
                self.logger.warning(message)
                runtime.connection.schedd.act(htcondor2.JobAction.Release, record.job_id, reason=message)
                return True
            self._remove(record.job_id, "held: " + secrets.redact(record.hold_reason or ""))
            if record.hold.needs_more_memory:
                message += self._more_memory_next_time(aux["spec"])
            self.report_job_error(job_info, msg=message + " ")
            return False
        # Idle: released, or evicted when its annex expired. An annex job idle too
        # long is looked at (once per idle timeout): with its annex gone, or no slot
        # there that can run it, it waits for nothing and is moved.
        site = aux["site"]
        if site is None or site.kind != "annex":
            return True
        now = time.time()
        if aux.get("idle_since") is None:
            aux["idle_since"] = now
        if now - aux["idle_since"] <= runtime.idle_timeout_s:
            return True
        aux["idle_since"] = now
        ads = runtime.connection.schedd.query(_job_constraint(job_info.external_jobid), projection=[])
        stuck = ads and recovery.stuck_on_annex(runtime.connection.collector, ads[0], site.annex_name)
        return self._move_or_fail(job_info, stuck, ads[0]) if stuck else True

    def _held_without_event_log(self, job_info: SubmittedJobInfo) -> Optional[JobRecord]:
        """A held job's record from its ad, when the event log was never created. HTCondor writes the
        log as the job's owner; where the owner cannot write the submit directory there is none, and
        the job's outputs are held 12/13 (holds.py): asked of the schedd, so the run does not wait
        forever on a log that will never come."""
        tracker = self._runtime.tracker
        if tracker.path.exists() or time.time() - job_info.aux["waiting_since"] < NO_EVENT_LOG_GRACE_S:
            return None
        if not self._warned_no_event_log:
            self._warned_no_event_log = True
            self.logger.warning(f"HTCondor has not created the event log {tracker.path}: it writes it as the "
                                "job's owner, who cannot write there (see docs/real-access-point.md); "
                                "asking the schedd about each job instead")
        ads = self._runtime.connection.schedd.query(
            _job_constraint(job_info.external_jobid),
            projection=["JobStatus", "HoldReason", "HoldReasonCode", "HoldReasonSubCode"])
        if not ads or ads[0].get("JobStatus") != JobStatus.HELD:
            return None
        ad = ads[0]
        return JobRecord(job_info.external_jobid, phase=JobPhase.HELD, hold_reason=ad.get("HoldReason"),
                         hold_code=ad.get("HoldReasonCode"), hold_subcode=ad.get("HoldReasonSubCode"))

    def _more_memory_next_time(self, spec: JobSpec) -> str:
        """Remember that this job's next attempt asks for more memory than the held one did, whatever
        the hold's code (34, 26, 21: holds.py): a retry with the same request is held the same way."""
        held_with = spec.resources.get("mem_mb")
        if not isinstance(held_with, int):
            return ""
        floor = memory_for_retry(held_with)
        self._memory_floor[self._signature(spec)] = floor
        return f" A retry asks for at least {floor} MB (it was held with {held_with} MB)."

    def _signature(self, spec: JobSpec) -> str:
        return job_signature(spec.rule, spec.outputs, self._runtime.submit_options.workdir)

    def _wait_for_annex(self, job_info: SubmittedJobInfo) -> bool:
        runtime = self._runtime
        site = job_info.aux["site"]
        status = runtime.annexes.ensure(site)  # also retries a request a guard once refused
        if status.state is AnnexState.UP:
            runtime.connection.schedd.act(
                htcondor2.JobAction.Release, job_info.external_jobid, reason=f"annex {site.name} is up"
            )
            job_info.aux["held_for_annex"] = False
            self.logger.info(f"Annex {site.name} is up: released HTCondor job {job_info.external_jobid}")
            return True
        if time.time() - job_info.aux["waiting_since"] > runtime.idle_timeout_s:
            return self._move_or_fail(job_info, f"annex {site.annex_name} did not come up. {status.message}")
        return True

    def _move_or_fail(self, job_info: SubmittedJobInfo, why: str, job_ad=None) -> bool:
        """Send a job whose annex is not there to the next site of its rotation that can run it
        (the same job: it keeps its self-checkpoint); fail it when no site is left."""
        runtime, aux, job = self._runtime, job_info.aux, job_info.job
        if job_ad is None:
            ads = runtime.connection.schedd.query(_job_constraint(job_info.external_jobid), projection=[])
            job_ad = ads[0] if ads else None
        tried = aux.setdefault("tried", {aux["site"].name})
        site = job_ad is not None and recovery.next_site(runtime.config.rotation, runtime.config.sites, job.name,
                                                         _wildcards_of(job), job.attempt, tried, job_ad,
                                                         resource_request(aux["spec"]))
        if not site:
            return self._fail_waiting(job_info, why)
        status = runtime.annexes.ensure(site)
        recovery.retarget(runtime.connection.schedd, job_info.external_jobid, site)
        tried.add(site.name)
        self.logger.warning(f"HTCondor job {job_info.external_jobid} waited over {runtime.idle_timeout_s:g} s: "
                            f"{why} Moved it to site {site.name} (annex {site.annex_name}); it keeps its "
                            f"self-checkpoint. {status.message}")
        aux.update(site=site, waiting_since=time.time(), idle_since=None)
        return True

    def _fail_waiting(self, job_info: SubmittedJobInfo, why: str) -> bool:
        timeout = self._runtime.idle_timeout_s
        self._remove(job_info.external_jobid, f"waited over {timeout:g} s for its annex")
        self.report_job_error(job_info, msg=(
            f"HTCondor job {job_info.external_jobid} waited over {timeout:g} s and did not run: "
            f"{why} The job was removed. With --retries, Snakemake resubmits it as the next "
            f"attempt, which rotation sends to the next site. "
        ))
        return False

    def _remove(self, job_id: str, reason: str) -> None:
        self._runtime.connection.schedd.act(htcondor2.JobAction.Remove, job_id, reason=reason)

    def _failure_message(self, job_info: SubmittedJobInfo, record) -> str:
        where = f" on annex {record.annex}" if record.annex else ""
        where += f" (slot {record.slot})" if record.slot else ""
        what = (
            f"exited with return value {record.return_value}"
            if record.return_value is not None else record.end_reason
        )
        message = f"HTCondor job {record.job_id}{where} {what}. "
        tail = secrets.redact(_tail(job_info.aux["stderr"]))
        if tail:
            message += f"Last lines of its stderr:\n{tail}\n"
        return message + _execute_side_hint(record.return_value, tail)

    def _job_spec(self, job: JobExecutorInterface) -> JobSpec:
        outputs = _products(job)
        if self._runtime.submit_options.shared_fs:
            files = dict(inputs=list(job.input), outputs=outputs)
        else:
            # OSDF objects move between origin and execute point as URL transfers.
            transfers = osdf_transfer.plan(
                job.input, outputs,
                sandbox_storage_prefix=str(self.workflow.storage_settings.remote_job_local_storage_prefix),
            )
            files = dict(inputs=transfers.inputs, outputs=transfers.outputs,
                         output_remaps=transfers.output_remaps, environment=transfers.environment)
        direct = direct_shell.direct_command(job) if self._runtime.direct_shell else None
        # format_job_exec() is a shell command (it may `export` variables and
        # chain with &&), quoted for a shell: hand it to one, never re-quote it.
        shell_path, command = direct or ("/bin/sh", self.format_job_exec(job))
        resources = dict(job.resources.items())
        resources = resources if direct else _with_room_for_snakemake(resources)
        spec = JobSpec(
            rule=job.name,
            jobid=job.jobid,
            argv=[shell_path, "-c", _in_sandbox_workdir(
                recovery.with_checkpoint_exit(_creating_logs(command, _logs(job))),
                self._runtime.submit_options.sandbox_workdir)],
            wildcards=_wildcards_of(job),
            resources=resources,
            threads=job.threads,
            attempt=job.attempt,
            ships_workflow_sources=direct is None,
            **files,
        )
        floor = self._memory_floor.get(self._signature(spec))
        if floor is not None and resources.get("mem_mb", 0) < floor:
            spec = dataclasses.replace(spec, resources=_with_memory(resources, floor))
        return spec

    def _print_plan(self) -> None:
        config = self._runtime.config
        jobs = [(job.name, _wildcards_of(job)) for job in self.workflow.dag.needrun_jobs() if not job.is_group()]
        try:
            plan = plan_report(config.rotation, jobs)
        except RotationError as error:
            raise WorkflowError(str(error)) from error
        if plan:
            self.logger.info(plan)


def _wildcards_of(job: JobExecutorInterface) -> dict:
    # A group job spans several rules and has no wildcards of its own; it is
    # placed with policy "any" unless a profile names the group.
    return {} if job.is_group() else dict(job.wildcards.items())


def _members(job: JobExecutorInterface) -> list:
    return list(job.jobs) if job.is_group() else [job]


def _products(job: JobExecutorInterface) -> list:
    """What must come back: outputs, logs and benchmarks, for a group of every member job (the
    submit side checks the group's intermediate files too, not only what leaves the group)."""
    return list(dict.fromkeys(product for member in _members(job) for product in member.products()))


def _logs(job: JobExecutorInterface) -> list:
    return list(dict.fromkeys(log for member in _members(job) for log in member.log))


def _creating_logs(command: str, logs: list) -> str:
    """`command`, then (if it succeeded) an empty file for each log it did not write.

    Snakemake does not require a rule to write its log, but HTCondor holds a job
    whose listed output files are missing, and the logs are listed so they come back.
    """
    if not logs:
        return command
    names = " ".join(shlex.quote(str(log)) for log in logs)
    return (f'{command} && for log in {names}; do [ -e "$log" ] || '
            f'{{ mkdir -p "$(dirname "$log")" && : > "$log"; }}; done')


def _in_sandbox_workdir(command: str, where: str | None) -> str:
    """`command`, run where the workdir is in the sandbox (below it when sources came from outside)."""
    return command if where is None else f"cd {shlex.quote(where)} && {command}"


def _with_room_for_snakemake(resources: dict) -> dict:
    """The rule's resources, with room for the job's own Snakemake process."""
    sized = {name.split("_")[0] for name in resources if name.startswith(("mem", "disk"))}
    defaults = {name: value for name, value in SPAWNED_SNAKEMAKE_DEFAULTS.items() if name.split("_")[0] not in sized}
    resources = {**defaults, **resources}
    if "mem" in sized and isinstance(resources.get("mem_mb"), int):
        # Snakemake gives every memory resource as mem_mb too (and mem, mem_mib): keep one.
        resources = {name: value for name, value in resources.items() if name not in ("mem", "mem_mib")}
        resources["mem_mb"] += SPAWNED_SNAKEMAKE_MB
    return resources


def _execute_side_hint(return_value: Optional[int], stderr_tail: str) -> str:
    """What the execute side lacks, when the failure says so: a command not on its PATH (exit 127),
    or a Python without the workflow's modules. Jobs run there as the submitting user, with
    the PATH the job sets (no login environment) and whatever Python the site or image has."""
    missing = MISSING_MODULE.search(stderr_tail)
    if return_value != COMMAND_NOT_FOUND and not missing:
        return ""
    lacks = (f"its Python has no module {missing.group(1)!r}" if missing
             else "a command the job runs is not on its PATH")
    return (f"The execute side lacks the workflow's software: {lacks}. A job runs `python -m snakemake` "
            f"(or the rule's command) with PATH={EXECUTE_POINT_PATH} and the Python found there. Fix: "
            "give the jobs a container image with the workflow's software (--htcannex-container-image), "
            "or have the site provide a `python` with it on that PATH (docs/real-access-point.md). ")


def _with_memory(resources: dict, mem_mb: int) -> dict:
    """`resources` asking for `mem_mb` of memory (Snakemake's other spellings of it dropped)."""
    return {**{name: value for name, value in resources.items() if name not in ("mem", "mem_mib")},
            "mem_mb": mem_mb}


def _job_constraint(job_id: str) -> str:
    cluster, proc = job_id.split(".")
    return f"ClusterId == {cluster} && ProcId == {proc}"


def _tail(path: Optional[str], lines: int = STDERR_TAIL_LINES) -> str:
    if not path:
        return ""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@dataclasses.dataclass
class _Runtime:
    """Everything the executor opens once per Snakemake run."""

    config: Catalogue
    connection: schedd_seam.Connection
    tracker: EventLogTracker
    annexes: AnnexManager
    hold_policy: HoldPolicy
    submit_options: SubmitOptions
    idle_timeout_s: float
    direct_shell: bool
    withheld_secrets: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def open(cls, settings, workflow) -> "_Runtime":
        if settings.config is None:
            raise WorkflowError(
                "htcannex needs its profile file: set --htcannex-config PATH, or "
                "`htcannex-config: htcannex.yaml` in the profile's config.yaml "
                "(`htcannex profiles install` installs the local and nairr profiles)"
            )
        config_path = Path(settings.config).expanduser().resolve()
        try:
            config = load_catalogue(config_path)
        except HtcannexConfigError as error:
            raise WorkflowError(str(error)) from error
        target = settings.schedd or config.pool
        pool_dir = Path(settings.pool_dir).resolve() if settings.pool_dir else None
        try:
            connection = schedd_seam.connect(target, pool_dir)
        except schedd_seam.ScheddNotFound as error:
            raise WorkflowError(str(error)) from error
        backend = (
            EmbeddedBackend(connection.pool, config_path)
            if connection.pool is not None else HtcondorCliBackend()
        )
        guards = config.annex
        if settings.max_annexes is not None:
            guards = dataclasses.replace(guards, max_annexes=settings.max_annexes)
        annexes = AnnexManager(
            connection.collector, backend, AnnexLedger(paths.annex_ledger(Path.cwd())),
            guards, mode=settings.annex_mode or config.annex.mode,
        )
        try:
            idle_timeout_s = (
                parse_duration_s(settings.idle_timeout, field="--htcannex-idle-timeout")
                if settings.idle_timeout else config.annex.idle_timeout_s
            )
        except UnitError as error:
            raise WorkflowError(str(error)) from error
        # Secrets never go into a job ad (see secrets.py); the user is told which were withheld.
        environment, withheld = secrets.withhold({
            # The embedded pool's execute points are this machine.
            "PATH": os.environ["PATH"] if connection.pool is not None else EXECUTE_POINT_PATH,
            **workflow.spawned_job_args_factory.envvars(),
        })
        sources = () if settings.shared_fs else sorted(workflow.dag.get_sources())
        submit_options = SubmitOptions(
            workdir=Path.cwd(),
            log_path=paths.event_log(Path.cwd()),
            shared_fs=settings.shared_fs,
            container_image=settings.container_image,
            extra_commands=config.submit_commands,
            # Snakemake's --envvars and storage settings reach the job through its
            # environment rather than an `export` in the command, so that a job's
            # own variables (osdf_transfer's backend) can win over them.
            environment=environment,
            workflow_sources=sources,
            transfer_root=None if settings.shared_fs else transfer_root(Path.cwd(), [*sources, *_local_inputs(workflow)]),
        )
        submit_options.logs_dir.mkdir(parents=True, exist_ok=True)
        return cls(
            config, connection, EventLogTracker(paths.event_log(Path.cwd())), annexes,
            HoldPolicy(settings.hold_policy, settings.hold_releases), submit_options, idle_timeout_s,
            not settings.snakemake_in_every_job, withheld,
        )


def _local_inputs(workflow) -> list[str]:
    """The local input files of every job this run will submit (storage files travel as URLs)."""
    return [str(path) for job in workflow.dag.needrun_jobs() for path in job.input
            if not getattr(path, "is_storage", False)]
