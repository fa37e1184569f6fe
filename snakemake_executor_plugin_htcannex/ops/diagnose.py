"""Why is a job idle or held: the hold in plain words, or a match analysis against annex slots.

`diagnose(job_ad, catalogue, collector)` is what `htcannex why JOB` prints. For
a held job it explains the HoldReasonCode and says what to change (holds.py has
the words). For a job that has left the queue (from the history) it says how it ended, and the
last lines its command wrote. For an idle job it renders matching.py's analysis of the job against
every annex slot, live and from the catalogue: *which* clause fails (memory,
GPUs, GPU memory/capability, the annex name) on which site, and what to change.
"""
import re
from pathlib import Path
from typing import Optional

import classad2
from htcondor_codes import JobStatus, status_word

from snakemake_executor_plugin_htcannex.sites.catalogue import Catalogue
from snakemake_executor_plugin_htcannex.submit.description import LOGS_ATTRIBUTE
from snakemake_executor_plugin_htcannex.track import failure_hints
from snakemake_executor_plugin_htcannex.track.holds import Hold
from snakemake_executor_plugin_htcannex.sites.matching import SlotAnalysis, analyse_slot, catalogue_slot_ad, live_slots
from snakemake_executor_plugin_htcannex.schedd import job_id as schedd_job_id

# What to change when a clause fails, keyed by an attribute the clause names (a regular expression).
FIXES = (
    ("RequireGPUs", "the slot's GPUs are too small or too old for gpu_memory / gpu_capability: lower them "
                    "or rotate the rule to a site with bigger GPUs"),
    ("GPUs", "the job asks for more GPUs (resources: gpu) than a slot here has: ask for fewer or use a GPU site"),
    ("Memory", "the job asks for more memory (resources: mem_mb) than a slot here has: lower mem_mb, or "
               "raise the site's memory in htcannex.yaml if the queue allows it"),
    ("Cpus", "the job asks for more cores (threads) than a slot here has: lower threads"),
    ("Disk", "the job asks for more disk (resources: disk_mb) than a slot here has"),
    ("HasFileTransferPluginMethods", "no transfer plugin here serves the job's URLs (its WantTransferPluginMethods, "
                                     "e.g. osdf): install the OSDF client on the execute point (HTCondor's "
                                     "tarballs and the pelican-osdf-compat package have it), or send the rule to a "
                                     "site whose execute points have it"),
    ("CondorVersion", "the execute point's HTCondor is too old for the job's file transfer (checkpoint files, "
                      "relative paths): ask the site for a current HTCondor"),
    ("HasFileTransfer", "the execute point does not transfer files: use a site whose execute points do"),
    ("FileSystemDomain", "the job reads its files where they are (--htcannex-shared-fs), so only slots of the "
                         "submit machine's FileSystemDomain take it: leave shared-fs off to transfer its files"),
    ("HasSelfCheckpointTransfers", "the execute point cannot transfer a self-checkpointing job's checkpoint files: "
                                   "use a site with a current HTCondor"),
    # One fix for the runtime and the kind of image it runs (htcondor_codes.IMAGE_KINDS), which fail together.
    ("(?:HasContainer|HasSIF|HasDockerURL|HasSandboxImage)",
     "the execute point has no container runtime (Apptainer) that runs the job's image (a .sif file, a docker:// "
     "reference or a directory): send the rule to a site whose execute points have one, or give another kind of "
     "image"),
    ("AnnexName", "the job targets another annex (MY.TargetAnnexName); the rotation chose another site"),
    ("Owner", "the annex runs only its owner's jobs: create it as the user who submits"),
)


def explain_hold(code: Optional[int], subcode: Optional[int], reason: str, rule: str, job_id: str,
                 target_annex: Optional[str] = None, analysis: str = "the analysis below") -> list[str]:
    """The hold in plain words and what to change (holds.py has the words), as `htcannex why` prints
    it: where the words send the reader to `htcannex why JOB`, to `analysis` instead."""
    hold = Hold(code, subcode, reason)
    return [line.replace(f"`htcannex why {job_id}`", analysis)
            for line in (f"held: {hold.headline()}", *hold.explanation(rule, job_id, target_annex))]


def diagnose(job_ad: classad2.ClassAd, catalogue: Optional[Catalogue], collector) -> list[str]:
    """What `htcannex why` prints for one job ad."""
    job_id = schedd_job_id(job_ad)
    status = job_ad.get("JobStatus")
    rule = job_ad.get("HtcannexRule", "?")
    annex = job_ad.get("TargetAnnexName")
    lines = [f"job {job_id} (rule {rule}"
             + (f", site {job_ad['HtcannexSite']}" if "HtcannexSite" in job_ad else "")
             + f") is {status_word(status)}"]
    if status == JobStatus.HELD:
        lines += explain_hold(job_ad.get("HoldReasonCode"), job_ad.get("HoldReasonSubCode"),
                              job_ad.get("HoldReason", ""), rule, job_id, annex)
    elif status == JobStatus.RUNNING:
        where = f" (annex {annex})" if annex else ""
        return lines + [f"running on {job_ad.get('RemoteHost', '?')}{where}: nothing to explain"]
    elif status == JobStatus.REMOVED:
        return lines + removal_report(job_ad, rule, job_id, annex) + command_output(job_ad)
    elif status == JobStatus.COMPLETED:
        return lines + completion_report(job_ad) + command_output(job_ad)
    if status in (JobStatus.IDLE, JobStatus.HELD):
        lines += match_report(job_ad, catalogue, collector)
    return lines


def removal_report(job_ad: classad2.ClassAd, rule: str, job_id: str, annex: Optional[str]) -> list[str]:
    """Why a job left the queue without completing: removed, and the hold it was removed from. The
    schedd keeps that hold as LastHoldReason* (HoldReason* are undefined once it is not held)."""
    reason = job_ad.get("RemoveReason")
    lines = [f"removed from the queue: {reason}" if reason else "removed from the queue"]
    if job_ad.get("LastJobStatus") != JobStatus.HELD:
        return lines
    return lines + ["it was held when it was removed; the hold:",
                    *explain_hold(job_ad.get("LastHoldReasonCode"), job_ad.get("LastHoldReasonSubCode"),
                                  job_ad.get("LastHoldReason", ""), rule, job_id, annex,
                                  analysis="an analysis, which a job that has left the queue no longer has")]


def completion_report(job_ad: classad2.ClassAd) -> list[str]:
    """How a job that ran to its end ended (its terminated event's facts, kept in the history)."""
    if job_ad.get("ExitBySignal"):
        return [f"it was killed by signal {job_ad.get('ExitSignal', '?')}"]
    code = job_ad.get("ExitCode")
    if code == 0:
        return ["it exited 0: it succeeded, as far as HTCondor knows"]
    return [f"it exited with return value {code}: its command failed"]


def command_output(job_ad: classad2.ClassAd) -> list[str]:
    """The last lines of what the job's command said, from the files that came back (its stderr,
    the rule's logs, its stdout: failure_hints.command_output), as the failure message shows them."""
    iwd = Path(job_ad.get("Iwd", "."))
    logs = [name.strip() for name in job_ad.get(LOGS_ATTRIBUTE, "").split(",") if name.strip()]
    stderr = job_ad.get("Err")
    path, tail = failure_hints.command_output(str(iwd / stderr) if stderr else None, logs)
    return [f"its command's last lines ({path}):", tail] if tail else ["it left no stderr, stdout or log here"]


def match_report(job_ad: classad2.ClassAd, catalogue: Optional[Catalogue], collector) -> list[str]:
    header, analyses = _analyses(job_ad, catalogue, collector)
    return header + [line for analysis in analyses for line in render_analysis(analysis)]


def never_matches(job_ad: classad2.ClassAd, catalogue: Optional[Catalogue], collector) -> Optional[list[str]]:
    """The match report of a job that no slot matches, neither a slot in the collector nor a site of
    the catalogue; None when one does (the job may yet run)."""
    header, analyses = _analyses(job_ad, catalogue, collector)
    if any(analysis.matches for analysis in analyses):
        return None
    return header + [line for analysis in analyses for line in render_analysis(analysis)]


def _analyses(job_ad: classad2.ClassAd, catalogue: Optional[Catalogue],
              collector) -> tuple[list[str], list[SlotAnalysis]]:
    """(what the report says first: the target annex's state, the job against every slot live
    and from the catalogue)."""
    annex = job_ad.get("TargetAnnexName")
    owner = job_ad.get("Owner", "")
    header = []
    live = live_slots(collector, annex) if collector is not None else []
    if annex:
        header.append(f"annex {annex}: " + (f"up, {len(live)} slot(s) in the collector" if live else
                                           "NOT UP (no slot in the collector carries that AnnexName); the job "
                                           "cannot run until it is up or the job is moved"))
    analyses = [analyse_slot(job_ad, slot, source="collector", site=slot.get("AnnexName")) for slot in live]
    if catalogue is not None:
        analyses += [analyse_slot(job_ad, catalogue_slot_ad(site, owner), source="catalogue", site=site.name)
                     for site in catalogue.sites.values() if site.cpus and site.memory_mb]
    return header, analyses


def render_analysis(analysis: SlotAnalysis) -> list[str]:
    verdict = "matches" if analysis.matches else "does not match"
    lines = [f"  {analysis.slot} [{analysis.source}]: {verdict}"]
    unknown, fixes = [], set()
    for side, clauses in (("job Requirements", analysis.job_side), (f"slot {analysis.slot_expression}", analysis.slot_side)):
        for clause in clauses:
            if clause.fails:
                values = ", ".join(f"{name} = {value}" for name, value in clause.values.items())
                lines.append(f"    FAILS ({side}) {clause.text}   [{values}]")
                # A request too big fails on both sides (the job's clause and the slot's WithinResourceLimits): one fix.
                fix = _fix_for(clause.text)
                if fix not in fixes:
                    fixes.add(fix)
                    lines.append(f"      -> {fix}")
            elif clause.unknown:
                unknown.append(clause.text)
    if unknown:  # only the catalogue's slots leave clauses unjudged (matching.analyse_slot)
        lines.append(f"    not judged (the catalogue does not say): {'; '.join(unknown)}")
    return lines


def _fix_for(text: str) -> str:
    for attribute, fix in FIXES:
        if re.search(rf"\b{attribute}\b", text):
            return fix
    return "this clause comes from the rule's requirements or the site's `requirements:` in htcannex.yaml"
