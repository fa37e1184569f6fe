"""Rotation: which site each chunk of each run goes to, and on retry."""
import json
import subprocess
import sys

import pytest

from snakemake_executor_plugin_htcannex.sites.rotation import (
    Rotation,
    RotationError,
    RulePolicy,
    run_index,
)

SITES = ("expanse", "bridges2", "anvil", "delta", "jetstream2", "aws")


def rotation(policy: str, sites=SITES, **kwargs) -> Rotation:
    return Rotation(rules={"train_chunk": RulePolicy(policy, tuple(sites))}, **kwargs)


def site_of(rot: Rotation, run, chunk, attempt=1) -> str:
    return rot.place("train_chunk", {"run": str(run), "chunk": str(chunk)}, attempt).site


def test_round_robin_formula():
    rot = rotation("round-robin")
    for run in range(4):
        for chunk in range(9):
            assert site_of(rot, run, chunk) == SITES[(run + chunk) % len(SITES)]


def test_round_robin_parallel_runs_start_on_different_sites_and_visit_all():
    rot = rotation("round-robin")
    assert [site_of(rot, run, 0) for run in range(6)] == list(SITES)
    assert {site_of(rot, 3, chunk) for chunk in range(6)} == set(SITES)


def test_non_integer_run_ids_get_a_stable_index():
    assert run_index("12") == 12
    assert run_index("lr0.01-seed2") == run_index("lr0.01-seed2") != run_index("lr0.01-seed3")
    rot = rotation("round-robin")
    start = SITES.index(site_of(rot, "lr0.01-seed2", 0))
    assert [site_of(rot, "lr0.01-seed2", k) for k in range(6)] == [SITES[(start + k) % 6] for k in range(6)]


def test_shuffle_uses_each_site_once_before_any_repeats():
    rot = rotation("shuffle")
    for run in ("0", "7", "a1b2-uuid"):
        placements = [site_of(rot, run, chunk) for chunk in range(18)]
        for block in range(3):
            assert sorted(placements[block * 6:(block + 1) * 6]) == sorted(SITES)


def test_shuffle_orders_differ_between_runs_and_blocks():
    rot = rotation("shuffle")
    orders = {tuple(site_of(rot, run, chunk) for chunk in range(6)) for run in range(10)}
    assert len(orders) > 1
    first, second = ([site_of(rot, "3", c) for c in range(b * 6, b * 6 + 6)] for b in (0, 1))
    assert first != second


def test_pinned_runs_every_chunk_on_the_first_site():
    rot = rotation("pinned", sites=["expanse"])
    assert {site_of(rot, run, chunk) for run in range(3) for chunk in range(10)} == {"expanse"}
    assert site_of(rot, 0, 0, attempt=3) == "expanse"  # one site listed: retries stay


def test_any_policy_and_unlisted_rules_have_no_site():
    rot = rotation("round-robin")
    assert rot.place("prepare_data", {}).site is None
    assert Rotation(rules={"x": RulePolicy("any")}).place("x", {}).site is None


@pytest.mark.parametrize("policy", ["round-robin", "shuffle", "pinned"])
def test_a_retry_moves_to_the_next_site_along_the_policy_order(policy):
    rot = rotation(policy)
    if policy == "pinned":
        assert [site_of(rot, 2, 5, attempt) for attempt in (1, 2, 3)] == list(SITES[:3])
        return
    for run in range(3):
        for chunk in range(7):
            # attempt a of chunk k goes where chunk k + a - 1 would go on its first attempt
            assert site_of(rot, run, chunk, attempt=2) == site_of(rot, run, chunk + 1)
            assert site_of(rot, run, chunk, attempt=2) != site_of(rot, run, chunk)


def test_missing_wildcard_names_rule_and_wildcard():
    rot = rotation("round-robin")
    with pytest.raises(RotationError, match=r"rule train_chunk .*no wildcard 'chunk'"):
        rot.place("train_chunk", {"run": "0"})
    with pytest.raises(RotationError, match=r"rule train_chunk .*no wildcard 'run'"):
        rot.place("train_chunk", {"chunk": "0"})


def test_configurable_wildcard_names():
    rot = rotation("round-robin", run_wildcard="trial", chunk_wildcard="step")
    assert rot.place("train_chunk", {"trial": "1", "step": "2"}).site == SITES[3]
    with pytest.raises(RotationError, match="'trial'"):
        rot.place("train_chunk", {"run": "1", "chunk": "2"})


def test_non_numeric_chunk_is_refused():
    with pytest.raises(RotationError, match="not a chunk number"):
        rotation("round-robin").place("train_chunk", {"run": "0", "chunk": "last"})


def test_policy_needs_sites():
    with pytest.raises(ValueError, match="at least one site"):
        RulePolicy("round-robin", ())
    with pytest.raises(ValueError, match="unknown rotation policy"):
        RulePolicy("random", SITES)


PLAN_SCRIPT = """
import json, sys
from snakemake_executor_plugin_htcannex.sites.rotation import Rotation, RulePolicy
sites = tuple(json.loads(sys.argv[1]))
rot = Rotation(rules={"a": RulePolicy("shuffle", sites), "b": RulePolicy("round-robin", sites)})
jobs = [(rule, {"run": run, "chunk": str(k)}) for rule in "ab" for run in ("0", "x-y", "17") for k in range(13)]
print(json.dumps([p.site for p in rot.plan(jobs)]))
"""


def test_plan_is_the_same_in_another_process():
    jobs = [(rule, {"run": run, "chunk": str(k)}) for rule in "ab" for run in ("0", "x-y", "17") for k in range(13)]
    rot = Rotation(rules={"a": RulePolicy("shuffle", SITES), "b": RulePolicy("round-robin", SITES)})
    here = [placement.site for placement in rot.plan(jobs)]
    # A fresh interpreter has a different hash() salt; the plan must not depend on it.
    there = subprocess.run(
        [sys.executable, "-c", PLAN_SCRIPT, json.dumps(SITES)],
        capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "12345"},
    )
    assert json.loads(there.stdout) == here


@pytest.mark.parametrize("policy", ["round-robin", "shuffle"])
def test_consecutive_chunks_always_hop(policy):
    rot = rotation(policy)
    for run in [*map(str, range(20)), "uuid-a", "uuid-b"]:
        placements = [site_of(rot, run, chunk) for chunk in range(30)]
        assert all(here != after for here, after in zip(placements, placements[1:]))


@pytest.mark.parametrize("policy", ["round-robin", "shuffle", "pinned"])
def test_order_starts_at_the_attempts_site_and_lists_every_site_once(policy):
    rot = rotation(policy)
    for run in ("0", "5", "uuid-a"):
        for chunk in range(8):
            for attempt in (1, 2, 4):
                order = list(rot.order("train_chunk", {"run": run, "chunk": str(chunk)}, attempt))
                assert order[0] == site_of(rot, run, chunk, attempt)
                assert sorted(order) == sorted(SITES)
    assert list(rot.order("prepare", {})) == []
