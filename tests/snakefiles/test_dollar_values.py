"""`$` in values reaches the job unchanged: through the snakemake CLI against the local
executor, and value by value through HTCondor's own submit expansion (htcondor2.Submit) and the
embedded pool's match-time expansion (htcannex_pool/dollardollar.py)."""
import classad2
import htcondor2
import pytest

from htcannex_pool.dollardollar import ExpansionError, expand
from same_as_local import assert_same_as_local
from snakemake_executor_plugin_htcannex.submit_language import literal

TRICKY = ["$$(Memory)", "$(DOLLAR)", "$(dollar)x", "$(Cluster)", "$ENV(HOME)", "$", "$$", "$$$", "$$$(x)",
          "a$b$$c", "$$$$(x)", "$(DOLLAR)(DOLLAR)", "$$(DOLLARDOLLAR)", "$$([1+2])", "$F(x)", "$( DOLLAR)",
          "x$", "$$(", "$(", "plain"]


@pytest.mark.parametrize("value", TRICKY)
def test_a_literal_survives_submit_and_match_expansion(value):
    submitted = htcondor2.Submit({"executable": "/bin/true", "arguments": literal(value)}).expand("arguments")
    slot = classad2.ClassAd({"Memory": 2048})
    assert expand(classad2.ClassAd({"Arguments": submitted}), slot)["Arguments"] == value


def test_match_expansion_reads_the_slot_and_holds_what_it_cannot_expand():
    job = classad2.ClassAd({"Arguments": "$$(Memory) $$(Gone:none) $$([ MY.Id + TARGET.Memory ])", "Id": 1})
    expanded = expand(job, classad2.ClassAd({"Memory": 2048}))
    assert expanded["Arguments"] == "2048 none 2049"
    # Kept for later expansions without the slot (HTCondor's MATCH_ attributes).
    assert job["MATCH_Memory"] == 2048 and expand(job, None)["Arguments"] == "2048 none 2049"
    with pytest.raises(ExpansionError, match=r"Cannot expand \$\$ expression \(Gone\)\."):
        expand(classad2.ClassAd({"Arguments": "$$(Gone)"}), classad2.ClassAd({}))


@pytest.mark.slow
def test_wildcards_with_dollars_through_the_cli(tmp_path, embedded_pool):
    assert_same_as_local("dollars", tmp_path, embedded_pool)
