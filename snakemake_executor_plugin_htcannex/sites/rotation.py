"""Which site a training chunk runs on: policy x run x chunk x attempt -> site.

A rule opts in to a policy in the profile's htcannex.yaml; rules not listed
run with policy `any` (no annex: any slot that will take them).

- round-robin: chunk k of run r goes to sites[(r + k) mod n], so parallel runs
  start on different sites and every run visits them all.
- shuffle: each run walks its own order: for chunks n*b .. n*b + n-1 it uses
  permutation b of the sites, drawn from a generator seeded by sha256(run id,
  b), so every site is used once before any repeats and the order is the same
  in every process (Python's `hash()` is salted per process, so it is not used);
  a block never starts on the site the previous block ended on.
- pinned: every chunk on sites[0] (the baseline that does not hop).
- any: no site.

A retry moves on: attempt a uses the position a-1 further along the policy's
order (for pinned, along the listed sites: list one site to never move).

The run index r is the run wildcard when it is a non-negative integer;
otherwise (e.g. "lr0.01-seed2" or a uuid) it is the first 8 bytes of
sha256(run id) read as an unsigned integer, stable everywhere.
"""
import functools
import hashlib
import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

POLICIES = ("round-robin", "shuffle", "pinned", "any")


class RotationError(ValueError):
    """A job that a rotation policy cannot place; the message names rule and wildcard."""


@dataclass(frozen=True)
class RulePolicy:
    policy: str
    sites: tuple[str, ...] = ()

    def __post_init__(self):
        if self.policy not in POLICIES:
            raise ValueError(f"unknown rotation policy {self.policy!r}; use one of {POLICIES}")
        if self.policy != "any" and not self.sites:
            raise ValueError(f"rotation policy {self.policy!r} needs at least one site")


ANY = RulePolicy("any")


# A plan walks every chunk of every run: each run's index and permutations are worked out once.
@functools.lru_cache(maxsize=65536)
def run_index(run_id: str) -> int:
    """A stable non-negative index for a run id (see the module docstring)."""
    if run_id.isdecimal():
        return int(run_id)
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big")


@functools.lru_cache(maxsize=65536)
def shuffled_sites(sites: tuple[str, ...], run_id: str, block: int) -> tuple[str, ...]:
    """Permutation number `block` of `sites` for this run (stable across processes).

    A permutation that would start where the previous one ended has its first
    two sites swapped, so that consecutive chunks (and a retry) always hop."""
    previous_last = None
    for number in range(block + 1):
        seed = int.from_bytes(hashlib.sha256(f"{run_id}\0{number}".encode()).digest(), "big")
        order = list(sites)
        random.Random(seed).shuffle(order)
        if len(order) > 1 and order[0] == previous_last:
            order[0], order[1] = order[1], order[0]
        previous_last = order[-1]
    return tuple(order)


def _site_at(rule_policy: RulePolicy, run: str, chunk: int, attempt: int) -> str:
    """The site of a rotated rule's policy for this attempt of chunk `chunk` of run `run`."""
    sites = rule_policy.sites
    step = chunk + attempt - 1
    if rule_policy.policy == "round-robin":
        return sites[(run_index(run) + step) % len(sites)]
    if rule_policy.policy == "shuffle":
        block, position = divmod(step, len(sites))
        return shuffled_sites(sites, run, block)[position]
    return sites[(attempt - 1) % len(sites)]  # pinned


@dataclass(frozen=True)
class Placement:
    """Where one job goes; `site` is None for rules without rotation."""

    rule: str
    run: str | None
    chunk: int | None
    attempt: int
    site: str | None


@dataclass(frozen=True)
class Rotation:
    rules: Mapping[str, RulePolicy] = field(default_factory=dict)
    run_wildcard: str = "run"
    chunk_wildcard: str = "chunk"

    def policy_for(self, rule: str) -> RulePolicy:
        return self.rules.get(rule, ANY)

    def place(self, rule: str, wildcards: Mapping[str, object], attempt: int = 1) -> Placement:
        """The site for this attempt of this job (attempts count from 1, as Snakemake's)."""
        rule_policy = self.policy_for(rule)
        if rule_policy.policy == "any":
            return Placement(rule, None, None, attempt, None)
        run, chunk = self._run_and_chunk(rule, wildcards, attempt)
        return Placement(rule, run, chunk, attempt, _site_at(rule_policy, run, chunk, attempt))

    def order(self, rule: str, wildcards: Mapping[str, object], attempt: int = 1) -> Iterator[str]:
        """Every site of the rule's rotation once, in the order this attempt and the ones after it
        would visit them: where a job goes when the attempt's own site cannot run it
        (placement.py); nothing for policy `any`. Lazy: the first site usually suffices."""
        rule_policy = self.policy_for(rule)
        sites = rule_policy.sites
        if not sites:
            return
        run, chunk = self._run_and_chunk(rule, wildcards, attempt)
        seen: set[str] = set()
        # Shuffle may repeat a site across a block boundary before every site has come up.
        for later in range(attempt, attempt + 2 * len(sites)):
            site = _site_at(rule_policy, run, chunk, later)
            if site not in seen:
                seen.add(site)
                yield site
                if len(seen) == len(sites):
                    return

    def _run_and_chunk(self, rule: str, wildcards: Mapping[str, object], attempt: int) -> tuple[str, int]:
        """The job's run id and chunk number, for a rotated rule."""
        if attempt < 1:
            raise RotationError(f"rule {rule}: attempt {attempt} is not a Snakemake attempt (they start at 1)")
        run = str(self._wildcard(rule, wildcards, self.run_wildcard))
        chunk_text = str(self._wildcard(rule, wildcards, self.chunk_wildcard))
        if not chunk_text.isdecimal():
            raise RotationError(
                f"rule {rule}: wildcard {self.chunk_wildcard!r} is {chunk_text!r}, not a chunk number; "
                "rotation needs chunks numbered 0, 1, 2, ... (or set chunk_wildcard in htcannex.yaml)"
            )
        return run, int(chunk_text)

    def _wildcard(self, rule: str, wildcards: Mapping[str, object], name: str) -> object:
        if name not in wildcards:
            policy = self.policy_for(rule).policy
            raise RotationError(
                f"rule {rule} has rotation policy {policy!r} but no wildcard {name!r} "
                f"(its wildcards: {sorted(wildcards) or 'none'}); name the wildcard {name!r} in the rule's "
                "output, or set run_wildcard/chunk_wildcard in htcannex.yaml"
            )
        return wildcards[name]

    def plan(self, jobs: Iterable[tuple[str, Mapping[str, object]]]) -> list[Placement]:
        """First-attempt placements of the rotated jobs among (rule, wildcards) pairs."""
        return [
            self.place(rule, wildcards)
            for rule, wildcards in jobs
            if self.policy_for(rule).policy != "any"
        ]


def run_order_key(run: str) -> tuple[int, int, str]:
    """Sort key of run ids: numbered runs in numeric order (2 before 10), named runs after them."""
    return (0, int(run), "") if run.isdecimal() else (1, 0, run)
