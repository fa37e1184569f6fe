"""Faults the executor survives instead of failing the run.

- Snakemake killed and restarted: jobs it had submitted are still in the queue
  (the schedd, or the embedded pool's daemon, outlives it). `QueuedJobs` finds
  the job submitted earlier for the same outputs, by the `MY.HtcannexSignature`
  that description.py puts in every job ad, so the executor tracks that job
  instead of submitting a duplicate. A job that *completed* while Snakemake was
  down has left the queue: `FinishedJobs` finds it in the schedd's history, by
  the HTCondor job id Snakemake's incomplete marker names (Snakemake writes the
  marker with the id when the job is submitted and clears it when it sees the
  job end), so the executor reports it done instead of running it again.
- An annex that never comes up, that expired under a running chunk, or that
  came up with slots too small for the job (`stuck_on_annex`): the job waits
  idle (or held) for nothing. `next_site` picks the
  next site of the job's rotation whose catalogue slot can run it, and
  `retarget` edits the job's TargetAnnexName through the schedd seam, so the
  same job, with its self-checkpoint (transfer_checkpoint_files), runs there.
"""
from typing import Callable, Iterable, Optional

import classad2
from htcondor_codes import JobStatus

from .matching import analyse_slot, catalogue_slot_ad, live_slots
from .placement import Request, place
from .rotation import Rotation
from .site import Site

QUEUED_PROJECTION = ["ClusterId", "ProcId", "JobStatus", "HtcannexSignature", "HtcannexSite", "HoldReasonCode",
                     "QDate", "Err"]
FINISHED_PROJECTION = ["ClusterId", "ProcId", "JobStatus", "ExitCode", "HtcannexSignature", "HtcannexSite"]
# Which of several queued copies of one job to keep: the one furthest along.
PREFERENCE = {JobStatus.RUNNING: 0, JobStatus.IDLE: 1, JobStatus.HELD: 2}




def job_id(ad: classad2.ClassAd) -> str:
    return f"{ad['ClusterId']}.{ad['ProcId']}"


class QueuedJobs:
    """The htcannex jobs an earlier Snakemake left in the queue, by signature.

    Read with one schedd query, the first time a job is looked up (the executor's first
    run_job), so a run of thousands of jobs does not query the schedd once per job.
    """

    def __init__(self, schedd):
        self.schedd = schedd
        self._by_signature: Optional[dict] = None

    def take(self, signature: str) -> tuple[Optional[classad2.ClassAd], list[str]]:
        """The queued job with this signature to adopt, and the ids of surplus copies (to remove)."""
        if self._by_signature is None:
            self._by_signature = {}
            for ad in self.schedd.query(
                constraint=f"HtcannexSignature isnt undefined && "
                           f"(JobStatus == {JobStatus.IDLE:d} || JobStatus == {JobStatus.RUNNING:d} || JobStatus == {JobStatus.HELD:d})",
                projection=QUEUED_PROJECTION,
            ):
                self._by_signature.setdefault(ad["HtcannexSignature"], []).append(ad)
        ads = self._by_signature.pop(signature, [])
        if not ads:
            return None, []
        ads.sort(key=lambda ad: (PREFERENCE[ad["JobStatus"]], -ad.get("QDate", 0)))
        return ads[0], [job_id(ad) for ad in ads[1:]]


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


def next_site(rotation: Rotation, sites: dict, rule: str, wildcards: dict, attempt: int,
              tried: set, job_ad: classad2.ClassAd, request: Request) -> Optional[Site]:
    """The site a retry would go to (placement.place from the next attempt on: the first site of
    the rule's rotation that admits `request`), leaving out the sites in `tried` and those whose
    catalogue slot does not satisfy the job's Requirements; None when there is none."""
    passed = set(tried)
    while (site := place(rotation, sites, rule, wildcards, attempt + 1, request,
                         passed=frozenset(passed)).site) is not None:
        if site.kind == "annex" and site.cpus and site.memory_mb:
            # Judge the job as it would be there: pointed at that site's annex.
            moved = classad2.parseOne(repr(job_ad))
            moved["TargetAnnexName"] = site.annex_name
            slot = catalogue_slot_ad(site, job_ad.get("Owner", ""))
            if analyse_slot(moved, slot, source="catalogue", site=site.name).matches:
                return site
        passed.add(site.name)
    return None


def stuck_on_annex(collector, job_ad: classad2.ClassAd, annex: str) -> Optional[str]:
    """Why an idle job cannot run on its annex, in words; None when it is only waiting for a
    free slot there."""
    slots = live_slots(collector, annex)
    if not slots:
        return f"its annex {annex} is gone (expired?)."
    if not any(analyse_slot(job_ad, slot, source="collector").matches for slot in slots):
        return (f"no slot of its annex {annex} can run it (`htcannex why {job_id(job_ad)}` names the "
                "requirement that fails).")
    return None


def retarget(schedd, job: str, site: Site) -> None:
    """Point a queued job at `site`'s annex (it keeps its id, its checkpoint and its place in the queue)."""
    schedd.edit(job, "TargetAnnexName", classad2.quote(site.annex_name))
    schedd.edit(job, "HtcannexSite", classad2.quote(site.name))
