"""matching.py: a ClassAd expression split into its clauses, each evaluated against the other side
(`htcannex why` renders it: tests/ops/test_why.py)."""
import classad2

from snakemake_executor_plugin_htcannex.matching import evaluate_clauses, split_conjunction


def test_clauses_are_split_at_top_level_conjunctions_only():
    expression = ('(TARGET.Memory >= RequestMemory) && ((TARGET.GPUs >= 1) && (TARGET.Cpus >= 2)) '
                  '&& (TARGET.Arch == "X86_64" || TARGET.Arch == "aarch64") && regexp("a&&b", TARGET.Name)')
    assert split_conjunction(expression) == [
        "TARGET.Memory >= RequestMemory", "TARGET.GPUs >= 1", "TARGET.Cpus >= 2",
        'TARGET.Arch == "X86_64" || TARGET.Arch == "aarch64"', 'regexp("a&&b",TARGET.Name)',
    ]
    assert split_conjunction("a && b || c") == ["a && b || c"]


def test_each_clause_is_evaluated_against_the_slot():
    job = classad2.ClassAd({"RequestMemory": 4000, "RequestCpus": 1})
    slot = classad2.ClassAd({"Memory": 2048, "Cpus": 4})
    clauses = evaluate_clauses("(TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) "
                               "&& (TARGET.GPUs >= 1)", job, slot)
    assert [(clause.value if isinstance(clause.value, bool) else "undefined") for clause in clauses] == [
        False, True, "undefined"]
    assert clauses[0].values == {"TARGET.Memory": 2048, "RequestMemory": 4000}
