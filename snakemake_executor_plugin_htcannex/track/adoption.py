"""Adopting the jobs an earlier (killed) Snakemake submitted, instead of submitting them again.

Snakemake killed and restarted: jobs it had submitted are still in the queue (the schedd, or the
embedded pool's daemon, outlives it). `QueuedJobs` finds the job submitted earlier for the same
outputs, by the `MY.HtcannexSignature` that description.py puts in every job ad, so the executor
tracks that job instead of submitting a duplicate. A job that *completed* while Snakemake was down
has left the queue: `FinishedJobs` finds it in the schedd's history, by the HTCondor job id
Snakemake's incomplete marker names (Snakemake writes the marker with the id when the job is
submitted and clears it when it sees the job end), so the executor reports it done instead of
running it again. `Adoption.earlier_submission` makes that choice for one job.
"""
import dataclasses
import re
from typing import Callable, Iterable, Optional, Union

import classad2
import htcondor2
from htcondor_codes import JobStatus
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface

from snakemake_executor_plugin_htcannex import paths
from snakemake_executor_plugin_htcannex.track.holds import Hold
from snakemake_executor_plugin_htcannex.track.tracked_job import WaitingOn
from snakemake_executor_plugin_htcannex.submit.job_spec import missing_products
from snakemake_executor_plugin_htcannex.submit.prepared_scripts import PreparedScripts
from snakemake_executor_plugin_htcannex.schedd import UNANSWERED, job_id
from snakemake_executor_plugin_htcannex.sites.site import Site

# htcannex's jobs in the queue (of any run, any working directory).
QUEUED = (f"HtcannexSignature isnt undefined && "
          f"(JobStatus == {JobStatus.IDLE:d} || JobStatus == {JobStatus.RUNNING:d} || JobStatus == {JobStatus.HELD:d})")
QUEUED_PROJECTION = ["ClusterId", "ProcId", "JobStatus", "HtcannexSignature", "HtcannexSite", "HoldReasonCode",
                     "QDate", "Err", "HtcannexPreparedScript"]
FINISHED_PROJECTION = ["ClusterId", "ProcId", "JobStatus", "ExitCode", "HtcannexSignature", "HtcannexSite"]
# Which of several queued copies of one job to keep: the one furthest along.
PREFERENCE = {JobStatus.RUNNING: 0, JobStatus.IDLE: 1, JobStatus.HELD: 2}


class QueuedJobs:
    """The htcannex jobs an earlier Snakemake left in the queue, by signature.

    Read with one schedd query, the first time it is asked (at the executor's start), so a run
    of thousands of jobs does not query the schedd once per job.
    """

    def __init__(self, schedd):
        self.schedd = schedd
        self._by_signature: Optional[dict] = None

    def take(self, signature: str) -> tuple[Optional[classad2.ClassAd], list[classad2.ClassAd]]:
        """The queued job with this signature to adopt, and the surplus copies (to remove)."""
        ads = self._read().pop(signature, [])
        if not ads:
            return None, []
        ads.sort(key=lambda ad: (PREFERENCE[ad["JobStatus"]], -ad.get("QDate", 0)))
        return ads[0], ads[1:]

    def prepared_scripts(self) -> set[str]:
        """The prepared scripts the queued jobs name (HtcannexPreparedScript)."""
        return {ad["HtcannexPreparedScript"] for ads in self._read().values() for ad in ads
                if "HtcannexPreparedScript" in ad}

    def some_run_an_unnamed_script(self) -> bool:
        """Whether a queued job may run a prepared script its ad does not name: one an htcannex from
        before HtcannexPreparedScript submitted, whose command runs a script from the scripts directory.
        Asked only when there are scripts to remove: it is a second query."""
        pattern = classad2.quote(re.escape(str(paths.job_scripts_dir())))
        return bool(self.schedd.query(f"{QUEUED} && HtcannexPreparedScript is undefined && regexp({pattern}, Arguments)",
                                      projection=["ClusterId"]))

    def _read(self) -> dict:
        if self._by_signature is None:
            self._by_signature = {}
            for ad in self.schedd.query(constraint=QUEUED, projection=QUEUED_PROJECTION):
                self._by_signature.setdefault(ad["HtcannexSignature"], []).append(ad)
        return self._by_signature


class FinishedJobs:
    """The jobs an earlier (killed) Snakemake submitted and never saw end, as the schedd's history has them.

    Snakemake's incomplete markers name them (`marked_ids`: every HTCondor job id the markers of this
    run's jobs hold). They are read with one history query, the first time a job has a marker, limited
    to those clusters; `match` stops a real schedd's scan of its (long) history once all are found.
    A run that follows a clean one has no markers and makes no query.
    """

    def __init__(self, schedd, marked_ids: Callable[[], Iterable[str]]):
        self.schedd = schedd
        self._marked_ids = marked_ids
        self._by_id: Optional[dict] = None

    def completed(self, marked: Iterable[str], signature: str) -> Optional[classad2.ClassAd]:
        """The job that Snakemake's marker for one job names, if it is this job (its signature) and it
        completed with exit code 0; None otherwise (not finished yet, failed, removed, unknown here,
        or markers naming several submissions, which Snakemake itself refuses to resume)."""
        marked = set(marked)
        if len(marked) != 1:
            return None
        if self._by_id is None:
            self._by_id = self._read()
        ad = self._by_id.get(marked.pop())
        if ad is None or ad.get("HtcannexSignature") != signature:
            return None
        return ad if ad["JobStatus"] == JobStatus.COMPLETED and ad.get("ExitCode") == 0 else None

    def _read(self) -> dict:
        # A marker may hold another executor's id (a run begun with --executor slurm).
        ids = {job for job in self._marked_ids() if all(part.isdecimal() for part in job.split(".", 1))}
        if not ids:
            return {}
        clusters = ", ".join(sorted({job.split(".")[0] for job in ids}, key=int))
        ads = self.schedd.history(f"HtcannexSignature isnt undefined && member(ClusterId, {{{clusters}}})",
                                  FINISHED_PROJECTION, match=len(ids))
        return {job_id(ad): ad for ad in ads if job_id(ad) in ids}


@dataclasses.dataclass(frozen=True)
class StillQueued:
    """An earlier submission still in the queue: the executor tracks it as if it had submitted it."""

    job_id: str
    site: Optional[Site]
    waiting_on: WaitingOn  # ANNEX: held by htcannex until its annex is up, as a fresh submit would be
    stderr: Optional[str]
    prepared_script: Optional[str]  # the script prepared for it by the earlier Snakemake (prepared_scripts.py)


@dataclasses.dataclass(frozen=True)
class CompletedWhileDown:
    """An earlier submission that completed while Snakemake was down: nothing is left to wait for."""

    job_id: str


class Adoption:
    """For each job this run is about to submit, the earlier submission of it to adopt, if any."""

    def __init__(self, schedd, sites: dict, workflow, logger, scripts: PreparedScripts):
        self._schedd, self._sites, self._workflow, self._logger = schedd, sites, workflow, logger
        self._scripts = scripts
        self._left_in_queue = QueuedJobs(schedd)
        self._finished_while_down = FinishedJobs(schedd, self._marked_job_ids)

    def remove_stale_scripts(self) -> None:
        """At the run's start: remove the scripts an earlier (killed) Snakemake prepared for jobs that
        are no longer queued; those of queued jobs stay until the jobs end (adopted, or not)."""
        present = self._scripts.present()
        if not present:  # a run after a clean one asks the schedd nothing here
            return
        try:
            stale = sorted(set(present) - self._left_in_queue.prepared_scripts())
            if stale and self._left_in_queue.some_run_an_unnamed_script():
                self._logger.debug("Prepared scripts of earlier runs kept: a queued job may run one it does not name")
                return
        except UNANSWERED as error:  # asked again at the first job; the scripts wait for the next run
            self._logger.debug(f"Prepared scripts of earlier runs kept: the schedd did not answer ({error})")
            return
        self._scripts.remove(*stale)
        if stale:
            self._logger.debug(f"Removed the prepared scripts no queued job runs: {', '.join(stale)}")

    def earlier_submission(self, job: JobExecutorInterface,
                           signature: str) -> Union[StillQueued, CompletedWhileDown, None]:
        """The job an earlier (killed) Snakemake submitted for the same outputs (its `signature`),
        queued or completed while it was down; None when there is none."""
        ad, surplus = self._left_in_queue.take(signature)
        if ad is None:
            return self._completed_while_down(job, signature)
        if surplus:
            self._schedd.act(htcondor2.JobAction.Remove, [job_id(copy) for copy in surplus],
                             reason=f"duplicate of HTCondor job {job_id(ad)}")
            self._scripts.remove(*(copy.get("HtcannexPreparedScript") for copy in surplus))
        held_for_annex = (ad["JobStatus"] == JobStatus.HELD
                          and Hold(ad.get("HoldReasonCode"), ad.get("HoldReasonSubCode")).ours)
        waiting_on = WaitingOn.ANNEX if held_for_annex else WaitingOn.NOTHING
        self._logger.info(f"Adopted HTCondor job {job_id(ad)} for job {job.jobid}: it was submitted "
                          "before Snakemake restarted and is still queued, so it is not submitted again")
        return StillQueued(job_id(ad), self._sites.get(ad.get("HtcannexSite")), waiting_on, ad.get("Err"),
                           ad.get("HtcannexPreparedScript"))

    def _completed_while_down(self, job: JobExecutorInterface, signature: str) -> Optional[CompletedWhileDown]:
        """The job an earlier (killed) Snakemake submitted that completed while it was down, when its
        outputs are here."""
        # Snakemake's own incomplete marker names the submission (the persistence API that
        # dag.incomplete_external_jobid reads; that one says None under --rerun-incomplete, the
        # only way Snakemake runs a job whose outputs are marked incomplete).
        ad = self._finished_while_down.completed(self._workflow.persistence.external_jobids(job), signature)
        if ad is None or missing_products(job):
            return None
        # Its storage (osdf://) outputs went up before it completed: a failed upload holds the job.
        self._logger.info(f"Adopted HTCondor job {job_id(ad)} for job {job.jobid}: it completed (exit code 0) "
                          "while Snakemake was down and its outputs are here, so it is not submitted again")
        return CompletedWhileDown(job_id(ad))

    def _marked_job_ids(self) -> list:
        """The HTCondor job ids Snakemake's incomplete markers hold for the jobs this run needs."""
        persistence = self._workflow.persistence
        return [job_id for job in self._workflow.dag.needrun_jobs() for job_id in persistence.external_jobids(job)]
