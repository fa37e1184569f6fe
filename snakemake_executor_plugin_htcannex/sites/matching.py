"""Match analysis: does a job's Requirements hold on a slot, and do the slot's Requirements (START, and
the job's requests within its resources) take the job, clause by clause.

It splits the job's Requirements and each slot's Requirements (or, without them, its START) into
their `&&` clauses and evaluates every clause with classad2 against the other side (what
`condor_q -better-analyze` does), so a reader sees *which* clause fails. Used by `htcannex why`
(diagnose.py renders it) and by recovery.py (is a waiting job stuck on its annex; which site can
take it instead).

Slot ads come from two places: the site catalogue (`catalogue_slot_ad`: one ad per site, built
from `Site.slot_shape()`, so a site whose annex is not up can still be judged) and the live
collector (`live_slots`: the real slots of annexes that are up). Facts the catalogue does not
state (Arch, Disk...) evaluate to `undefined` there and are reported as unknown, not as failures; on a
live slot an undefined clause fails, as it does in the negotiator.

classad2's ExprTree has no API to walk a parse tree (it offers eval, simplify and its unparsed
text only), so clauses are split on the unparsed text at top-level `&&`, outside parentheses and
string literals, and each piece is parsed back with classad2.
"""
import re
from dataclasses import dataclass, field
from typing import Optional

import classad2
import htcondor2
from htcondor_codes import DIRECT_ATTACH_START, HEARD_FROM_LATELY, SLOT_REQUIREMENTS, STARTER_CAPABILITIES, annex_start, within_resource_limits

from snakemake_executor_plugin_htcannex.sites.site import Site, SiteKind

ATTRIBUTE = re.compile(r"\b(?:(MY|TARGET)\.)?([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()")
KEYWORDS = {"true", "false", "undefined", "error", "is", "isnt", "my", "target"}


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
    slot_side: list  # the slot's Requirements (or START) against the job
    slot_expression: str = "START"  # which of the two

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
    name, expression = _slot_requirements(slot_ad)
    job_side = evaluate_clauses(requirements, job_ad, slot_ad)
    slot_side = evaluate_clauses(expression, slot_ad, job_ad)
    if source == "catalogue":
        job_side = [_unstated(clause) for clause in job_side]
    else:
        job_side, slot_side = ([_live(clause) for clause in side] for side in (job_side, slot_side))
    return SlotAnalysis(slot=str(slot_ad.get("Name", site)), source=source, site=site,
                        job_side=job_side, slot_side=slot_side, slot_expression=name)


def _live(clause: Clause) -> Clause:
    """On a slot in the collector a clause that is undefined (an attribute the slot does not advertise, such as
    HasContainer where no container runtime is installed) or an error fails: the negotiator matches only when
    both Requirements are true."""
    return Clause(clause.text, False, clause.values) if clause.unknown else clause


def _unstated(clause: Clause) -> Clause:
    """A clause that fails only for want of a fact the catalogue does not state is not judged: some functions
    give false, not undefined, for an undefined argument (`stringListIMember("osdf",
    TARGET.HasFileTransferPluginMethods)` on a site whose transfer plugins the catalogue does not list)."""
    unstated = any(value == "undefined" and not name.startswith("MY.") for name, value in clause.values.items())
    if clause.fails and unstated:
        return Clause(clause.text, classad2.Value.Undefined, clause.values)
    return clause


def _slot_requirements(slot_ad: classad2.ClassAd) -> tuple[str, str]:
    """What a job must satisfy on the slot's side: its Requirements, which the negotiator matches (a 25.x startd
    advertises `Requirements = Start && WithinResourceLimits`: START, and the job's Request* within the slot's
    resources), else its START. A clause that only names another attribute of the slot is written out, so that
    the report names the request that does not fit (`TARGET.RequestCpus <= MY.Cpus`), not `WithinResourceLimits`."""
    if "Requirements" not in slot_ad:
        return "START", str(slot_ad.lookup("Start")) if "Start" in slot_ad else "true"
    clauses = []
    for clause in split_conjunction(slot_ad.lookup("Requirements")):
        name = clause.removeprefix("MY.")
        named = name.isidentifier() and name in slot_ad  # a clause that is only a name refers to that attribute
        clauses.append(f"({slot_ad.lookup(name)})" if named else f"({clause})")
    return "Requirements", " && ".join(clauses)


def catalogue_slot_ad(site: Site, owner: str) -> classad2.ClassAd:
    """One slot of `site`'s annex as the catalogue describes it (what the annex would offer), judged as
    its startd's would be: by its Requirements. It has what every starter advertises (file transfer); the
    catalogue states no disk, HTCondor version or transfer plugins: the clauses on those are not judged."""
    shape = site.slot_shape()
    ad = classad2.ClassAd({"Name": f"{site.name} (catalogue)", "Cpus": shape["cpus"],
                           "Memory": shape["memory_mb"], "GPUs": shape["gpus"], **STARTER_CAPABILITIES})
    ad["Requirements"] = classad2.ExprTree(SLOT_REQUIREMENTS)
    ad["WithinResourceLimits"] = classad2.ExprTree(within_resource_limits(("GPUs",) if shape["gpus"] else ()))
    if site.kind is SiteKind.ANNEX:
        ad["AnnexName"] = site.annex_name
        ad["Start"] = classad2.ExprTree(annex_start(owner))
    if shape["gpus"]:
        ad["GPUs_GlobalMemoryMb"] = shape["gpu_memory_mb"]
        ad["GPUs_Capability"] = shape["gpu_capability"]
        device = f'[ GlobalMemoryMb = {shape["gpu_memory_mb"]}; Capability = {shape["gpu_capability"]} ]'
        ad["AvailableGPUs"] = classad2.ExprTree("{ " + ", ".join([device] * shape["gpus"]) + " }")
    return ad


def live_slots(collector, annex: Optional[str]) -> list[classad2.ClassAd]:
    """The collector's slots of `annex` (or of every annex and the pool when None), each as a job
    could ever find it: a partitionable slot advertises what is left now (Cpus 0 when it is busy) and
    its whole as TotalSlot*, and a job that fits the whole only waits for it (HTCondor 25.14 annex
    and pool slots are partitionable); a real annex's slot advertises no START (DIRECT_ATTACH_START)
    and is judged by its annex's. The slots of a pilot that is gone but whose ads linger are left out."""
    constraint = (f"AnnexName == {classad2.quote(annex)} && " if annex else "") + HEARD_FROM_LATELY
    return [_whole(slot) for slot in collector.query(htcondor2.AdTypes.Startd, constraint=constraint, projection=[])]


def _whole(slot: classad2.ClassAd) -> classad2.ClassAd:
    start = slot.get("Start")
    if isinstance(start, str) and start.startswith(DIRECT_ATTACH_START) and "AnnexName" in slot:
        # A real annex's slot: the collector has the direct-attach string, not its START. Judge it by the START
        # the pilot runs, for the annex's own jobs (the owner it takes is the user who created it).
        slot = classad2.parseOne(repr(slot))
        slot["Start"] = classad2.ExprTree("MY.AnnexName =?= TARGET.TargetAnnexName")
    if slot.get("PartitionableSlot") is not True:
        return slot
    whole = classad2.parseOne(repr(slot))
    for resource in ("Cpus", "Memory", "Disk", "GPUs"):
        if f"TotalSlot{resource}" in slot:
            whole[resource] = slot[f"TotalSlot{resource}"]
    return whole
