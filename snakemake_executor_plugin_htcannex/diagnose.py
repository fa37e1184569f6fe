"""Why is a job idle or held: the hold in plain words, or a match analysis against annex slots.

`diagnose(job_ad, catalogue, collector)` is what `htcannex why JOB` prints. For
a held job it explains the HoldReasonCode and says what to change. For an idle
job it does what `condor_q -better-analyze` does, but about annexes: it splits
the job's Requirements and each slot's START into their `&&` clauses and
evaluates every clause with classad2 against the other side, so the operator
sees *which* clause fails (memory, GPUs, GPU memory/capability, the annex
name) on which site.

Slot ads come from two places: the site catalogue (one ad per site, built from
`Site.slot_shape()`, so a site whose annex is not up can still be judged) and
the live collector (the real slots of annexes that are up). Facts the
catalogue does not state (Arch, Disk...) evaluate to `undefined` there and are
reported as unknown, not as failures.

classad2's ExprTree has no API to walk a parse tree (it offers eval, simplify
and its unparsed text only), so clauses are split on the unparsed text at
top-level `&&`, outside parentheses and string literals, and each piece is
parsed back with classad2.
"""
import re
from dataclasses import dataclass, field
from typing import Optional

import classad2
import htcondor2
from htcondor_codes import JobStatus, status_word

from .holds import Hold
from .catalogue import Catalogue
from .site import Site

# Annex START, as HTCondor's annexes (and the embedded pool) set it.
ANNEX_START = '(MY.AnnexName =?= TARGET.TargetAnnexName) && (TARGET.Owner == "{owner}")'
ATTRIBUTE = re.compile(r"\b(?:(MY|TARGET)\.)?([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()")
KEYWORDS = {"true", "false", "undefined", "error", "is", "isnt", "my", "target"}

# What to change when a clause fails, keyed by an attribute the clause names.
FIXES = (
    ("RequireGPUs", "the slot's GPUs are too small or too old for gpu_memory / gpu_capability: lower them "
                    "or rotate the rule to a site with bigger GPUs"),
    ("GPUs", "the job asks for more GPUs (resources: gpu) than a slot here has: ask for fewer or use a GPU site"),
    ("Memory", "the job asks for more memory (resources: mem_mb) than a slot here has: lower mem_mb, or "
               "raise the site's memory in htcannex.yaml if the queue allows it"),
    ("Cpus", "the job asks for more cores (threads) than a slot here has: lower threads"),
    ("Disk", "the job asks for more disk (resources: disk_mb) than a slot here has"),
    ("AnnexName", "the job targets another annex (MY.TargetAnnexName); the rotation chose another site"),
    ("Owner", "the annex runs only its owner's jobs: create it as the user who submits"),
)


@dataclass
class Clause:
    text: str
    value: object  # True, False, or a classad2.Value (undefined / error)
    values: dict = field(default_factory=dict)  # attribute -> value on each side, for the reader

    @property
    def fails(self) -> bool:
        return self.value is False

    @property
    def unknown(self) -> bool:
        return not isinstance(self.value, bool)


@dataclass
class SlotAnalysis:
    slot: str
    source: str  # "catalogue" or "collector"
    site: Optional[str]
    job_side: list  # the job's Requirements against the slot
    slot_side: list  # the slot's START against the job

    @property
    def matches(self) -> bool:
        return not any(clause.fails for clause in self.job_side + self.slot_side)


def split_conjunction(expression) -> list[str]:
    """The `&&` clauses of a ClassAd expression, nested conjunctions flattened, parentheses removed.

    A clause joined by a lower-precedence operator (`||`, `? :`) at its top level stays whole.
    """
    text = _strip_parentheses(str(classad2.ExprTree(str(expression))).strip())
    if len(_split_top_level(text, "||")) > 1 or len(_split_top_level(text, "?")) > 1:
        return [text]
    pieces = _split_top_level(text, "&&")
    if len(pieces) == 1:
        return [text]
    return [clause for piece in pieces for clause in split_conjunction(piece)]


def _split_top_level(text: str, operator: str) -> list[str]:
    """`text` cut at `operator` where it is outside brackets and string literals."""
    pieces, depth, start, quote, index = [], 0, 0, None, 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = None
        elif char == '"':
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(operator, index):
            pieces.append(text[start:index].strip())
            start = index + len(operator)
            index = start
            continue
        index += 1
    pieces.append(text[start:].strip())
    return pieces


def _strip_parentheses(text: str) -> str:
    while text.startswith("(") and text.endswith(")") and _closes_at_end(text):
        text = text[1:-1].strip()
    return text


def _closes_at_end(text: str) -> bool:
    """Whether the `(` opening `text` is closed by its last character."""
    depth, quote = 0, None
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = None
            continue
        if char == '"':
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0 and index != len(text) - 1:
                return False
    return True


def evaluate_clauses(expression, scope: classad2.ClassAd, target: classad2.ClassAd) -> list[Clause]:
    """Each clause of `expression`, evaluated in `scope` (MY) against `target` (TARGET)."""
    results = []
    for text in split_conjunction(expression):
        value = classad2.ExprTree(text).eval(scope=scope, target=target)
        results.append(Clause(text, value, _referenced_values(text, scope, target)))
    return results


def _referenced_values(text: str, scope: classad2.ClassAd, target: classad2.ClassAd) -> dict:
    values = {}
    for prefix, name in ATTRIBUTE.findall(re.sub(r'"(?:\\.|[^"\\])*"', '""', text)):
        if name.lower() in KEYWORDS or name[0].isdigit():
            continue
        side = target if prefix == "TARGET" else scope
        key = f"{prefix}.{name}" if prefix else name
        if name in side:
            values[key] = _shown(side, name)
        elif not prefix and name in target:
            values[f"TARGET.{name}"] = _shown(target, name)
        else:
            values[key] = "undefined"
    return values


def _shown(ad: classad2.ClassAd, name: str):
    """An attribute's value for the reader: evaluated, or as written when it only makes sense
    elsewhere (RequireGPUs is evaluated per GPU device, not in the job ad)."""
    value = ad.eval(name)
    return str(ad.lookup(name)) if isinstance(value, classad2.Value) else value


def analyse_slot(job_ad: classad2.ClassAd, slot_ad: classad2.ClassAd, *, source: str,
                 site: Optional[str] = None) -> SlotAnalysis:
    requirements = job_ad.lookup("Requirements") if "Requirements" in job_ad else "true"
    start = slot_ad.lookup("Start") if "Start" in slot_ad else "true"
    return SlotAnalysis(
        slot=str(slot_ad.get("Name", site)), source=source, site=site,
        job_side=evaluate_clauses(requirements, job_ad, slot_ad),
        slot_side=evaluate_clauses(start, slot_ad, job_ad),
    )


def catalogue_slot_ad(site: Site, owner: str) -> classad2.ClassAd:
    """One slot of `site`'s annex as the catalogue describes it (what the annex would offer)."""
    shape = site.slot_shape()
    ad = classad2.ClassAd({"Name": f"{site.name} (catalogue)", "Cpus": shape["cpus"],
                           "Memory": shape["memory_mb"], "GPUs": shape["gpus"]})
    if site.kind == "annex":
        ad["AnnexName"] = site.annex_name
        ad["Start"] = classad2.ExprTree(ANNEX_START.format(owner=owner))
    if shape["gpus"]:
        ad["GPUs_GlobalMemoryMb"] = shape["gpu_memory_mb"]
        ad["GPUs_Capability"] = shape["gpu_capability"]
        device = f'[ GlobalMemoryMb = {shape["gpu_memory_mb"]}; Capability = {shape["gpu_capability"]} ]'
        ad["AvailableGPUs"] = classad2.ExprTree("{ " + ", ".join([device] * shape["gpus"]) + " }")
    return ad


def explain_hold(code: Optional[int], subcode: Optional[int], reason: str, rule: str, job_id: str,
                 target_annex: Optional[str] = None) -> list[str]:
    """The hold in plain words and what to change (holds.py has the words)."""
    hold = Hold(code, subcode, reason)
    return [f"held: {hold.headline()}", *hold.explanation(rule, job_id, target_annex)]


def diagnose(job_ad: classad2.ClassAd, catalogue: Optional[Catalogue], collector) -> list[str]:
    """What `htcannex why` prints for one job ad."""
    job_id = f"{job_ad['ClusterId']}.{job_ad['ProcId']}"
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
    elif status in (JobStatus.REMOVED, JobStatus.COMPLETED):
        return lines + ["it has left the queue: nothing to explain"]
    if status in (JobStatus.IDLE, JobStatus.HELD):
        lines += match_report(job_ad, catalogue, collector)
    return lines


def live_slots(collector, annex: Optional[str]) -> list[classad2.ClassAd]:
    """The collector's slots of `annex` (or of every annex and the pool when None)."""
    constraint = f"AnnexName == {classad2.quote(annex)}" if annex else "true"
    return list(collector.query(htcondor2.AdTypes.Startd, constraint=constraint, projection=[]))


def match_report(job_ad: classad2.ClassAd, catalogue: Optional[Catalogue], collector) -> list[str]:
    annex = job_ad.get("TargetAnnexName")
    owner = job_ad.get("Owner", "")
    lines = []
    live = live_slots(collector, annex) if collector is not None else []
    if annex:
        lines.append(f"annex {annex}: " + (f"up, {len(live)} slot(s) in the collector" if live else
                                          "NOT UP (no slot in the collector carries that AnnexName); the job "
                                          "cannot run until it is up or the job is moved"))
    analyses = [analyse_slot(job_ad, slot, source="collector", site=slot.get("AnnexName")) for slot in live]
    if catalogue is not None:
        analyses += [analyse_slot(job_ad, catalogue_slot_ad(site, owner), source="catalogue", site=site.name)
                     for site in catalogue.sites.values() if site.cpus and site.memory_mb]
    for analysis in analyses:
        lines += render_analysis(analysis)
    return lines


def render_analysis(analysis: SlotAnalysis) -> list[str]:
    verdict = "matches" if analysis.matches else "does not match"
    lines = [f"  {analysis.slot} [{analysis.source}]: {verdict}"]
    unknown = []
    for side, clauses in (("job Requirements", analysis.job_side), ("slot START", analysis.slot_side)):
        for clause in clauses:
            if clause.fails:
                values = ", ".join(f"{name} = {value}" for name, value in clause.values.items())
                lines.append(f"    FAILS ({side}) {clause.text}   [{values}]")
                lines.append(f"      -> {_fix_for(clause.text)}")
            elif clause.unknown:
                unknown.append(clause.text)
    if unknown:
        why = "the catalogue does not say" if analysis.source == "catalogue" else "undefined on this slot"
        lines.append(f"    not judged ({why}): {'; '.join(unknown)}")
    return lines


def _fix_for(text: str) -> str:
    for attribute, fix in FIXES:
        if re.search(rf"\b{attribute}\b", text):
            return fix
    return "this clause comes from the rule's requirements or the site's `requirements:` in htcannex.yaml"
