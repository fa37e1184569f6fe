"""Feasibility first: the site a job goes to is the first one of its rotation that can run it.

`place()` is the one judgement of where a job runs, made before any annex is requested or anything
is submitted, and made the same way by the dry run's plan (the htcannex logger plugin),
`htcannex annex plan`, the executor's run_job (every attempt: a retry moves on along the rotation)
and the move of a waiting job (recovery.next_site). From the attempt's own position in the
rotation (rotation.py) it walks the rule's sites in rotation order and takes the first whose
`Site.admit` accepts the job's request; each site it passes is a `Skip` with the site's reason.
A job no site of its rotation admits is impossible: it fails alone, with every site's reason and
fix, and no annex is requested for it.

The request judged is made once per job (submit/request.py): in a run the request the job submits,
which the chosen site's admission (`Decision.request`) then is, as build_submit takes it; in the
dry run's plan, each job as one that runs its own Snakemake. An MLDAG chunk's request depends on
the site (its template's {resource.*}): then it is a function giving each site's verdict
(template.admission), judged the same way, and the template as filled for the chosen site
(`Decision.template`) goes to build_submit with it.
"""
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from snakemake_executor_plugin_htcannex.sites.rotation import Placement, Rotation
from snakemake_executor_plugin_htcannex.sites.site import Admission, ResourceRequest, Site

# A job's request, or for a request that depends on the site, each site's verdict on it (None: any slot).
Request = ResourceRequest | Callable[[Site | None], Admission]


@dataclass(frozen=True)
class Skip:
    """A site of the rotation passed over for one job, and why it cannot run it."""

    site: str
    reason: str


@dataclass(frozen=True)
class Decision:
    """Where one attempt of one job runs: `site` (None with policy `any`: any slot), the sites
    passed over before it, or `impossible` (why no site of the rotation can run it); `request`:
    the job's request as `site` admits it, and for an MLDAG chunk its `template` filled for `site`."""

    placement: Placement | None  # the rotation's own choice, before any skip (None: `decided_at`)
    site: Site | None
    skipped: tuple[Skip, ...] = ()
    impossible: str | None = None
    request: ResourceRequest | None = None
    template: object | None = None  # an htcondor2.Submit (submit/template.py)


def place(rotation: Rotation, sites: Mapping[str, Site], rule: str, wildcards: Mapping[str, object],
          attempt: int, request: Request, *, passed: frozenset = frozenset(),
          verdicts: dict | None = None) -> Decision:
    """The first site, from this attempt's position in the rule's rotation on, that admits
    `request`; sites named in `passed` are left out (a waiting job's sites already tried).
    `verdicts`: a dict, kept across calls with the same sites, of each (rule, request)'s verdicts
    by site: the jobs of a plan share a few requests, and a verdict depends on nothing
    else, so each is judged once per site. Raises rotation.RotationError for a rotated rule without its run or
    chunk wildcard."""
    chosen = rotation.place(rule, wildcards, attempt)
    if chosen.site is None:
        admission = admit(None, request, rule)
        return Decision(chosen, None, impossible=admission.refusal, request=admission.request,
                        template=admission.template)
    # A request that depends on the site is its function: one per job's request.
    by_site = {} if verdicts is None else verdicts.setdefault((rule, request), {})
    skipped = []
    for name in rotation.order(rule, wildcards, attempt):
        if name in passed:
            continue
        site = sites[name]
        if name not in by_site:
            by_site[name] = admit(site, request, rule)
        admission = by_site[name]
        if admission.refusal is None:
            return Decision(chosen, site, tuple(skipped), request=admission.request, template=admission.template)
        skipped.append(Skip(name, admission.refusal))
    return Decision(chosen, None, tuple(skipped), impossible=impossible(rule, skipped))


def admit(site: Site | None, request: Request, rule: str) -> Admission:
    """`site`'s verdict on `request` (None: any slot, which admits it as it is)."""
    if callable(request):
        return request(site)
    return site.admit(request, rule=rule) if site is not None else Admission(request)


def decided_at(site: Site | None, request: Request, rule: str) -> Decision:
    """The decision to run at `site` (None: any slot) for a caller that chose the site itself (a
    benchmark's own placement, a test); raises SiteRefusal when the site cannot run it."""
    admission = admit(site, request, rule)
    return Decision(None, site, request=admission.or_raise(), template=admission.template)


def impossible(rule: str, refusals: list[Skip]) -> str:
    """Why no site of a rule's rotation can run a job: each site's refusal, with its fix, by site
    name (the same words for every job the same sites refuse alike, whatever its rotation order)."""
    reasons = "".join(f"\n  - {skip.reason}" for skip in sorted(refusals, key=lambda skip: skip.site))
    return (f"no site of rule {rule}'s rotation can run this job, so no annex is requested for it and it is "
            f"not submitted:{reasons}\nFix the rule's resources or the sites (htcannex.yaml) as one of these says")
