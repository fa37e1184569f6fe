"""Snakemake logger plugin `htcannex`: `snakemake -n` ends with the htcannex plan.

A dry run goes through Snakemake's own dry-run executor and never loads the
htcannex executor, so the placement plan (run x chunk -> site) that a real run
prints before it submits would be missing from the one command users run to
see what will happen. Snakemake does hand every logger plugin the jobs a dry
run lists (JOB_INFO records: rule name and wildcards); this handler keeps them
and, when Snakemake shuts logging down after the listing, prints the plan with
`plan.plan_report`, the code the executor uses, on the profile's htcannex.yaml: the same
placement (each job's resources judged against each site, skips and impossible jobs with their
reasons) and the plan as a budget.

A profile turns it on with

    logger: [htcannex]
    logger-htcannex-config: htcannex.yaml

It prints nothing in a real run (the executor prints the plan there) and is
never set up in a job's own Snakemake (Snakemake skips logger plugins in its
subprocess and remote modes).

Snakemake hands its logger plugins every record through a queue and a thread of their own: a copy
of each record and a wake-up of that thread, ~45 us a record, two records a job in a dry run (3 s
of CPU at 30,000 jobs) and several in a real one, for a handler that keeps a few fields of one kind
of record or, in a real run, none. Where it is the only logger plugin, its first record takes it
off that queue (`_off_the_queue`): a dry run's records then reach it directly, a real run's not at all.
"""
import gc
import logging
import logging.handlers
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from snakemake_interface_common.exceptions import WorkflowError
from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

from snakemake_executor_plugin_htcannex import paths
from snakemake_executor_plugin_htcannex.annex.ledger import AnnexLedger
from snakemake_executor_plugin_htcannex.sites.catalogue import HtcannexConfigError, load_catalogue
from snakemake_executor_plugin_htcannex.ops.plan import plan_report
from snakemake_executor_plugin_htcannex.sites.rotation import RotationError

__all__ = ["LogHandler", "LogHandlerSettings"]

# This plugin's name, as a profile names it (`logger: [htcannex]`).
NAME = "htcannex"


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    config: Optional[str] = field(
        default=None,
        metadata={
            "help": "The htcannex.yaml whose rotation `snakemake -n` prints the plan of. In a "
            "profile's config.yaml write `logger-htcannex-config: htcannex.yaml`: Snakemake "
            "resolves a value naming a file in the profile directory to that file.",
        },
    )


class LogHandler(LogHandlerBase):
    def __post_init__(self) -> None:
        self.jobs: list[tuple[str, Mapping, Mapping, int]] = []
        self.failed = False
        self.reported = False
        self.catalogue = self._load_catalogue() if self.common_settings.dryrun else None
        self.queued = True  # the records come through Snakemake's plugin queue

    def _load_catalogue(self):
        if self.settings is None or self.settings.config is None:
            raise WorkflowError(
                "the htcannex logger needs the profile's htcannex.yaml: set "
                "--logger-htcannex-config PATH, or `logger-htcannex-config: htcannex.yaml` "
                "next to `logger: [htcannex]` in the profile's config.yaml"
            )
        path = Path(self.settings.config).expanduser().absolute()
        if not path.is_file():
            # load_catalogue's own fix names the executor's flag; this setting is another one.
            raise WorkflowError(str(HtcannexConfigError(
                path, "(file)", "does not exist",
                "point --logger-htcannex-config (profile key logger-htcannex-config) at the "
                "profile's htcannex.yaml")))
        try:
            return load_catalogue(path)
        except HtcannexConfigError as error:
            raise WorkflowError(str(error)) from error

    def emit(self, record: logging.LogRecord) -> None:
        if self.queued:
            self.queued = False
            self._off_the_queue(record)
        if self.catalogue is None:
            return
        event = getattr(record, "event", None)
        if event == LogEvent.JOB_INFO:
            # The job's own wildcards dict and resource list, not copies: the jobs live as long as
            # the run, and two more dicts per job were ~6 MiB of peak RSS at 9,000 jobs.
            self.jobs.append((record.rule_name, record.wildcards or {}, record.resources or {}, record.threads or 1))
        elif event == LogEvent.ERROR:
            # Snakemake's own error (not a plugin's logged complaint): a dry run that failed
            # has no plan, the jobs it listed are not what a run would do.
            self.failed = True

    def _off_the_queue(self, record: logging.LogRecord) -> None:
        """Put this handler (in a dry run; nothing in a real run) where Snakemake's plugin queue is fed,
        when it is the only logger plugin: on the logger the record came through that holds that queue's
        handler, the one QueueHandler Snakemake added for its plugins."""
        if set(getattr(self.common_settings, "log_handler_settings", None) or ()) != {NAME}:
            return  # another plugin needs the queue
        instead = [self] if self.catalogue is not None else []
        logger = logging.getLogger(record.name)
        # Under logging's own lock, which addHandler and removeHandler take; a new list, not one changed
        # in place: a record being logged on another thread goes on through the old list, so every record
        # reaches this handler once, through the queue (those logged before) or directly.
        with logging._lock:
            while logger is not None:
                queues = [handler for handler in logger.handlers if isinstance(handler, logging.handlers.QueueHandler)]
                if queues:
                    if len(queues) == 1:
                        logger.handlers = [new for handler in logger.handlers
                                           for new in (instead if handler is queues[0] else [handler])]
                    return
                logger = logger.parent if logger.propagate else None

    def close(self) -> None:
        # Snakemake closes its plugin handlers once the run is over and every record has been
        # handled; logging.shutdown() closes them again at exit.
        if self.catalogue is not None and not self.failed and not self.reported:
            self.reported = True
            # The plan allocates a few objects per job after Snakemake has built millions: the
            # collection they would set off walks all of those to free nothing (at 30,000 jobs a
            # full one cost 0.8 s of CPU, as much as the plan). Reference counting frees the plan.
            collecting = gc.isenabled()
            gc.disable()
            try:
                # Snakemake runs in its working directory by now: the run's own annex ledger.
                spent = AnnexLedger(paths.annex_ledger(Path.cwd())).spent_core_hours()
                report = plan_report(self.catalogue, self.jobs, spent)
            except (RotationError, RuntimeError) as error:  # RuntimeError: a malformed ledger, named
                report = f"htcannex plan: {error}"
            finally:
                if collecting:
                    gc.enable()
            if report:
                # Where Snakemake's own console output of this run went (stdout in a dry run).
                stream = sys.stdout if self.common_settings.stdout else sys.stderr
                print(report, file=stream, flush=True)
        super().close()

    # Snakemake keeps its console handler only when no plugin claims the stream: this
    # handler adds the plan after the run's own output and replaces none of it.
    @property
    def writes_to_stream(self) -> bool:
        return False

    @property
    def writes_to_file(self) -> bool:
        return False

    # Records reach emit() unfiltered: --quiet must not hide jobs from the plan.
    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return False

    @property
    def needs_rulegraph(self) -> bool:
        return False
