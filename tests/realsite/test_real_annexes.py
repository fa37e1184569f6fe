"""htcannex on real annexes: chunks of a chain rotate between two NAIRR systems (Expanse's `shared` and
Delta's `cpu` queue), each system's annex created by `htcondor annex create` over ssh as a Slurm job whose
pilot joins the access point's pool; run from the snakemake command line as the unprivileged submitter.
"""
import csv
import json
import re
import shutil
import time

import pytest
import yaml
from protein_lm_workflow.conftest import TINY_DATA, TINY_TRAIN
from realsite_harness import PROFILE, REPOSITORY

from snakemake_executor_plugin_htcannex.sites.catalogue import load_catalogue

pytestmark = [pytest.mark.realsite, pytest.mark.slow]

CHAIN = REPOSITORY / "tests" / "workflows" / "chunks"


def snakemake(realsite, workdir, *args, timeout=900):
    return realsite.run("snakemake", "--profile", workdir / "profile", *args, cwd=workdir, timeout=timeout, check=False)


def with_profile(realsite, source, sites=None, **annex):
    """A working directory with `source` and the harness's profile (annex settings overridden), at a site
    where nothing is left of earlier tests (an ssh connection htcannex did not open is not its to close)."""
    realsite.close_ssh_masters()
    realsite.wait_until_nothing_is_left()
    workdir = realsite.workdir(source)
    (workdir / "profile").mkdir()
    for name in ("config.yaml", "htcannex.yaml"):
        (workdir / "profile" / name).write_text((PROFILE / name).read_text())
    if annex or sites:
        path = workdir / "profile" / "htcannex.yaml"
        document = yaml.safe_load(path.read_text())
        document["annex"].update(annex)
        for name, changes in (sites or {}).items():
            document["sites"][name].update(changes)
        path.write_text(yaml.safe_dump(document))
    return realsite.own(workdir)


def annex_of_batch_job(realsite) -> dict[str, str]:
    """Slurm job id -> annex name, from HTCondor's record of each annex request (its local-universe job)."""
    ads = realsite.run("condor_history", "-constraint", "hpc_annex_name isnt undefined", "-af", "hpc_annex_JOB_ID",
                       "hpc_annex_name").stdout.split("\n")[:-1]
    ads += realsite.run("condor_q", "-allusers", "-constraint", "hpc_annex_name isnt undefined", "-af",
                        "hpc_annex_JOB_ID", "hpc_annex_name").stdout.split("\n")[:-1]
    return dict(line.split() for line in ads if not line.startswith("undefined"))


def chunks_ran_on_their_planned_annexes(realsite, workdir, rule: str, count: int, since: float) -> dict[str, str]:
    """Assert that each of the `count` jobs of `rule` queued since `since` ran in the pilot of its planned system's
    annex (the slot's name carries the pilot's Slurm job); returns Slurm job id -> annex name."""
    catalogue = load_catalogue(workdir / "profile" / "htcannex.yaml")
    batch = annex_of_batch_job(realsite)
    ran = realsite.run("condor_history", "-constraint", f'HtcannexRule == "{rule}" && QDate >= {int(since)}', "-af",
                       "HtcannexWildcards", "TargetAnnexName", "LastRemoteHost").stdout.split("\n")[:-1]
    assert len(ran) == count, ran
    for line in ran:
        wildcards, target, slot = re.fullmatch(r"(\{.*\}) (\S+) (\S+)", line).groups()
        planned = catalogue.sites[catalogue.rotation.place(rule, json.loads(wildcards)).site].annex_name
        assert (target, batch[re.search(r"@slurm(\d+)@", slot)[1]]) == (planned, planned), (line, batch)
    return batch


def test_chunks_hop_between_real_annexes_of_two_systems_and_nothing_is_left(realsite):
    workdir = with_profile(realsite, CHAIN)
    began = time.time()
    result = snakemake(realsite, workdir, "--config", "runs=[0, 1]", "chunks=3")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    for run in ("0", "1"):
        assert (workdir / f"results/run{run}/chunk2.txt").read_text().splitlines() == [
            f"run {run} chunk {chunk}" for chunk in range(3)]
    log = result.stderr
    # Each system's annex was created by HTCondor's own command; the jobs waited on hold for it.
    assert "requested annex htcannex-expanse" in log and "requested annex htcannex-delta" in log, log[-3000:]
    assert "Annex expanse is up: released" in log and "Annex delta is up: released" in log

    batch = chunks_ran_on_their_planned_annexes(realsite, workdir, "train_chunk", 6, began)
    # The ledger counts each real request once; the run ended every annex it requested.
    ledger = json.loads((workdir / ".htcannex" / "annex-requests.json").read_text())
    assert sorted(entry["name"] for entry in ledger) == sorted(set(batch.values())) == \
        ["htcannex-delta", "htcannex-expanse"]
    realsite.wait_until_nothing_is_left()


def test_protein_lm_hops_between_real_annexes_with_provenance_ok_and_identical_twins(realsite):
    workflows = REPOSITORY / "workflows"
    workdir = with_profile(realsite, workflows / "protein_lm")
    # chunked_training next to it, as in the repository (its rules are included from there).
    shutil.rmtree(workdir.parent / "chunked_training", ignore_errors=True)
    realsite.workdir(workflows / "chunked_training").rename(workdir.parent / "chunked_training")
    tiny = {"data": TINY_DATA, "train": TINY_TRAIN, "sweep": {"seed": {"list": [1]}},
            "pretrain": {"chunks": 2, "epochs_per_job": 1, "checkpoint_every_steps": 3, "threads": 1},
            "finetune": {"epochs": 1, "lr": 0.001, "batch_size": 16, "threads": 1}}
    (workdir / "tiny.yaml").write_text(yaml.safe_dump(tiny))
    realsite.own(workdir)
    began = time.time()
    result = snakemake(realsite, workdir, "--configfile", "tiny.yaml", timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    compare = workdir / "results" / "compare"
    with open(compare / "summary.tsv") as handle:
        [row] = list(csv.DictReader(handle, delimiter="\t"))
    assert row["verdict"] == "identical (bitwise)"
    with open(compare / "provenance.tsv") as handle:
        assert [line["state"] for line in csv.DictReader(handle, delimiter="\t")] == ["ok", "ok"]
    # A chunk whose annex is busy with the twin waits for it: it is not moved.
    chunks_ran_on_their_planned_annexes(realsite, workdir, "train_chunk", 2, began)
    assert "Moved it" not in result.stderr
    realsite.wait_until_nothing_is_left()
