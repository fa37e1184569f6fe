"""matching.py: a ClassAd expression split into its clauses, each evaluated against the other side
(`htcannex why` renders it: tests/ops/test_why.py)."""
import classad2

from snakemake_executor_plugin_htcannex.sites.matching import analyse_slot, evaluate_clauses, live_slots, split_conjunction


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


# A partitionable slot as a real HTCondor 25.14.0 startd advertises it (condor_status -l on a personal
# pool, 2026-12-04; the disk clause's catalog terms left out): the negotiator matches a job against
# its Requirements, START and the job's requests within the slot's resources. A 1-core job's own Requirements
# name no Cpus (condor_submit writes that clause only above one core).
REAL_SLOT = """
Name = "slot1@plain-host1@vm"
Cpus = 1
Memory = 2048
Disk = 100000
Requirements = Start && WithinResourceLimits
Start = (MY.AnnexName =?= TARGET.TargetAnnexName) && ((MY.AnnexName =?= undefined) || (TARGET.Owner == "htcuser"))
WithinResourceLimits = MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && TARGET.RequestMemory <= MY.Memory && MY.Disk > 0 && TARGET.RequestDisk <= MY.Disk
"""


def test_a_job_asking_more_cores_than_a_real_slot_has_fails_the_slots_requirements_by_name():
    job = classad2.ClassAd({"RequestCpus": 64, "RequestMemory": 100, "RequestDisk": 10, "Owner": "htcuser"})
    job["Requirements"] = classad2.ExprTree("(TARGET.Memory >= RequestMemory) && (TARGET.Disk >= RequestDisk)")
    analysis = analyse_slot(job, classad2.parseOne(REAL_SLOT), source="collector")
    assert not analysis.matches and analysis.slot_expression == "Requirements"
    [failing] = [clause for clause in analysis.job_side + analysis.slot_side if clause.fails]
    assert failing.text == "TARGET.RequestCpus <= MY.Cpus"
    assert failing.values == {"TARGET.RequestCpus": 64, "MY.Cpus": 1}
    fits = classad2.ClassAd({"RequestCpus": 1, "RequestMemory": 100, "RequestDisk": 10, "Owner": "htcuser"})
    assert analyse_slot(fits, classad2.parseOne(REAL_SLOT), source="collector").matches


# A real annex's partitionable slot in the collector (condor_status -l of an `htcondor annex create` pilot on the
# realsite harness, HTCondor 25.13.2): the startd is directly attached to the access point's schedd, so it
# advertises START as a string that no job matches (src/condor_startd.V6/Resource.cpp, get_update_ads).
REAL_ANNEX_SLOT = """
Name = "slot1@slurm4@vm"
AnnexName = "htcannex-delta"
IsAnnex = true
PartitionableSlot = true
Cpus = 0
TotalSlotCpus = 1
Memory = 1024
TotalSlotMemory = 4096
Disk = 66258596
Requirements = Start && WithinResourceLimits
Start = "Directly attached to schedd htcannex-realsite@vm"
WithinResourceLimits = MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && TARGET.RequestMemory <= MY.Memory && MY.Disk > 0 && TARGET.RequestDisk <= MY.Disk
"""


class OneSlotCollector:
    def __init__(self, ad: str):
        self.ad = classad2.parseOne(ad)

    def query(self, ad_type, constraint, projection):
        return [self.ad]


def test_a_busy_real_annex_slot_is_judged_by_its_annexs_start_not_the_direct_attach_string():
    [slot] = live_slots(OneSlotCollector(REAL_ANNEX_SLOT), "htcannex-delta")
    job = classad2.ClassAd({"RequestCpus": 1, "RequestMemory": 300, "RequestDisk": 10, "Owner": "htcuser",
                            "TargetAnnexName": "htcannex-delta"})
    job["Requirements"] = classad2.ExprTree("(TARGET.Memory >= RequestMemory)")
    # Its one core is busy now: a job for this annex waits for it, it is not unmatchable.
    assert analyse_slot(job, slot, source="collector").matches
    job["TargetAnnexName"] = "htcannex-expanse"
    assert not analyse_slot(job, slot, source="collector").matches
