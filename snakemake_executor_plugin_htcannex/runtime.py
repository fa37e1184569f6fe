"""What the executor opens once per Snakemake run, from its settings and the workflow: the
catalogue, the connection to the pool, the event-log tracker, the annex manager, the hold policy
and the options every submit shares. A mistake in any of them is a WorkflowError naming it.
"""
import dataclasses
import functools
import os
import sys
from pathlib import Path

from snakemake_interface_common.exceptions import WorkflowError

from snakemake_executor_plugin_htcannex import paths, secrets
from snakemake_executor_plugin_htcannex import schedd as schedd_seam
from snakemake_executor_plugin_htcannex.annex.backends import backend_for
from snakemake_executor_plugin_htcannex.annex.ledger import AnnexLedger
from snakemake_executor_plugin_htcannex.annex.manager import AnnexManager, AnnexState, AnnexStatus
from snakemake_executor_plugin_htcannex.sites.catalogue import Catalogue, HtcannexConfigError, load_catalogue
from snakemake_executor_plugin_htcannex.submit.description import SubmitOptions, transfer_root
from snakemake_executor_plugin_htcannex.track.event_log import EventLogTracker, HoldPolicy
from snakemake_executor_plugin_htcannex.submit.unlisted_sources import unlisted_sources
from snakemake_executor_plugin_htcannex.units import UnitError, parse_duration_s

@dataclasses.dataclass
class Runtime:
    """Everything the executor opens once per Snakemake run."""

    config: Catalogue
    connection: schedd_seam.Connection
    tracker: EventLogTracker
    annexes: AnnexManager
    hold_policy: HoldPolicy
    submit_options: SubmitOptions
    idle_timeout_s: float
    direct_commands: bool  # rules run without Snakemake in the job where they can (direct_command.py)
    # The Python a job's own command runs (Snakemake's get_python_executable, and
    # paths.JOB_PYTHON_VARIABLE in the job's environment): this one on the embedded pool,
    # whose execute points are this machine; `python` from the job's PATH on a real execute
    # point (a site's or a container image's: this side's path means nothing there).
    job_python: str
    withheld_secrets: list[str] = dataclasses.field(default_factory=list)
    # Workflow sources htcannex found that Snakemake does not list (unlisted_sources.py), to tell the user.
    unlisted_sources: list[str] = dataclasses.field(default_factory=list)

    @classmethod
    def open(cls, settings, workflow, logger) -> "Runtime":
        """The run's settings, connection and helpers; `logger`: Snakemake's, which tells the user."""
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
        guards = config.annex
        if settings.max_annexes is not None:
            guards = dataclasses.replace(guards, max_annexes=settings.max_annexes)
        annexes = AnnexManager(
            connection.collector, backend_for(connection, config_path), AnnexLedger(paths.annex_ledger(Path.cwd())),
            guards, mode=settings.annex_mode or config.annex.mode,
            tell_outcome=functools.partial(_tell_annex_outcome, logger),
        )
        try:
            idle_timeout_s = (
                parse_duration_s(settings.idle_timeout, field="--htcannex-idle-timeout")
                if settings.idle_timeout else config.annex.idle_timeout_s
            )
        except UnitError as error:
            raise WorkflowError(str(error)) from error
        job_python = sys.executable if connection.embedded else "python"
        # Secrets never go into a job ad (see secrets.py); the user is told which were withheld.
        environment, withheld = secrets.withhold({
            # The embedded pool's execute points are this machine.
            "PATH": os.environ["PATH"] if connection.embedded else paths.EXECUTE_POINT_PATH,
            paths.JOB_PYTHON_VARIABLE: job_python,
            **workflow.spawned_job_args_factory.envvars(),
        })
        listed = () if settings.shared_fs else sorted(workflow.dag.get_sources())
        unlisted = [] if settings.shared_fs else unlisted_sources(workflow, listed, Path.cwd())
        sources = [*listed, *unlisted]
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
            few_transfer_items=not connection.embedded,
        )
        submit_options.logs_dir.mkdir(parents=True, exist_ok=True)
        return cls(
            config, connection, EventLogTracker(paths.event_log(Path.cwd())), annexes,
            HoldPolicy(settings.hold_policy, settings.hold_releases), submit_options, idle_timeout_s,
            not settings.snakemake_in_every_job, job_python, withheld, unlisted,
        )


def _tell_annex_outcome(logger, status: AnnexStatus) -> None:
    """What came of a create made on its own thread (annex/manager.py), in Snakemake's log: a failure is
    for the user to act on."""
    (logger.warning if status.state is AnnexState.NEEDS_USER else logger.info)(status.message)


def _local_inputs(workflow) -> list[str]:
    """The local input files of every job this run will submit (storage files travel as URLs)."""
    return [str(path) for job in workflow.dag.needrun_jobs() for path in job.input
            if not getattr(path, "is_storage", False)]
