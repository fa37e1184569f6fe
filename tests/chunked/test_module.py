"""chunked_training used as a Snakemake module from a user's own repository, on the embedded pool."""
import json

import pytest
import yaml

from .conftest import PROFILE, annexes_by_job, pool_env, run, toy_config

pytestmark = pytest.mark.slow


def test_module_from_a_separate_directory_trains_every_epoch_once_hopping_between_annexes(user_project, embedded_pool):
    # The user's own config says osdf (a profile's config: no longer overrides a user's configfile).
    (user_project / "config.yaml").write_text(yaml.safe_dump(toy_config(checkpoint_store="osdf", vars={
        "epochs": {"type": "value", "value": 3},
        "epochs_per_job": {"type": "value", "value": 1},
        "lr": {"type": "list", "value": [0.1, 0.01, "1e-3"]},
    })))
    result = run(["snakemake", "--executor", "htcannex", "--profile", str(PROFILE)], user_project,
                 pool_env(embedded_pool))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]

    summary = (user_project / "results" / "toy" / "compare" / "summary.tsv").read_text().splitlines()
    rows = [dict(zip(summary[0].split("\t"), line.split("\t"))) for line in summary[1:]]
    assert sorted(row["lr"] for row in rows) == ["0.01", "0.1", "1e-3"]
    assert {row["twins"] for row in rows} == {"identical (bitwise)"}

    origin = embedded_pool.origin_dir / "htcannex" / "chunked_training" / "toy"
    annex_of = annexes_by_job(user_project)
    ads = embedded_pool.schedd().history('HtcannexRule == "train_chunk" || HtcannexRule == "train_baseline"',
                                         ["ClusterId", "ProcId", "HtcannexRule", "HtcannexWildcards"])
    chunks = {}
    for ad in ads:
        wildcards = json.loads(ad["HtcannexWildcards"])
        chunks.setdefault((ad["HtcannexRule"], wildcards.get("run")), []).append(
            (int(wildcards["chunk"]), annex_of[f"{ad['ClusterId']}.{ad['ProcId']}"]))
    for row in rows:
        (final,) = origin.glob(f"set-*/distributed/{row['run']}/distributed-{row['run']}-chunk-3.txt")
        history = final.read_text().splitlines()
        # Every epoch exactly once, in order, with the run's own learning rate.
        assert [line.split()[:4] for line in history] == [["epoch", str(e), "lr", row["lr"]] for e in (1, 2, 3)]
        hops = [annex for _, annex in sorted(chunks[("train_chunk", row["run"])])]
        assert len(hops) == 3 and len(set(hops)) == 3, hops
        # The twin trains all epochs in one job, on one annex.
        assert [chunk for chunk, _ in chunks[("train_baseline", row["run"])]] == [3]
