"""Moving a job whose annex fails it to the next site of its rotation, instead of failing the run.

An annex that never comes up, that expired under a running chunk, or that
came up with slots too small for the job (`stuck_on_annex`): the job waits
idle (or held) for nothing. `next_site` picks the
next site of the job's rotation whose catalogue slot can run it, and
`retarget` edits the job's TargetAnnexName through the schedd seam, so the
same job, with its self-checkpoint (transfer_checkpoint_files), runs there.
(A Snakemake restart is survived by adoption.py; when a job is moved, waiting.py.)
"""
from typing import Optional

import classad2

from snakemake_executor_plugin_htcannex.sites.matching import analyse_slot, catalogue_slot_ad, live_slots
from snakemake_executor_plugin_htcannex.sites.placement import Request, place
from snakemake_executor_plugin_htcannex.sites.rotation import Rotation
from snakemake_executor_plugin_htcannex.schedd import job_id
from snakemake_executor_plugin_htcannex.sites.site import Site, SiteKind


def next_site(rotation: Rotation, sites: dict, rule: str, wildcards: dict, attempt: int,
              tried: set, job_ad: classad2.ClassAd, request: Request) -> Optional[Site]:
    """The site a retry would go to (placement.place from the next attempt on: the first site of
    the rule's rotation that admits `request`), leaving out the sites in `tried` and those whose
    catalogue slot does not satisfy the job's Requirements; None when there is none."""
    passed = set(tried)
    while (site := place(rotation, sites, rule, wildcards, attempt + 1, request,
                         passed=frozenset(passed)).site) is not None:
        if site.kind is SiteKind.ANNEX and site.cpus and site.memory_mb:
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
    if not live_slots(collector, annex):
        return f"its annex {annex} is gone (expired?)."
    return annex_cannot_run(collector, job_ad, annex)


def annex_cannot_run(collector, job_ad: classad2.ClassAd, annex: str) -> Optional[str]:
    """Why no slot of `annex`, which is up, can run the job, in words; None when one can, or when the
    annex is not up. A job bound to an annex matches only that annex's slots, all of the shape its
    request gave them: none that can run it will appear there."""
    slots = live_slots(collector, annex)
    if not slots or any(analyse_slot(job_ad, slot, source="collector").matches for slot in slots):
        return None
    return (f"no slot of its annex {annex} can run it (`htcannex why {job_id(job_ad)}` names the "
            "requirement that fails).")


def retarget(schedd, job: str, site: Site) -> None:
    """Point a queued job at `site`'s annex (it keeps its id, its checkpoint and its place in the queue)."""
    schedd.edit(job, "TargetAnnexName", classad2.quote(site.annex_name))
    schedd.edit(job, "HtcannexSite", classad2.quote(site.name))
