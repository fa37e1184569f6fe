"""`htcannex status` checks each finished chunk against the plan: completed once, on the annex it was sent to.

The board reads an event log as a real HTCondor 25 writes it (execute events name the slot, not
the annex) and the job ads; the annex of a slot comes from the collector's slot ads.
"""
import json

from event_log_text import execute, submit, terminated
from snakemake_executor_plugin_htcannex.ops.board import BoardSource, render


def job_events(cluster: int, slot: str) -> str:
    job = f"{cluster:03d}.000"
    return submit(job) + execute(job, slot) + terminated(job, 0)


class Schedd:
    def __init__(self, ads):
        self.ads = ads

    def query(self, constraint, projection):
        return []

    def history(self, constraint, projection):
        return self.ads


class Collector:
    def query(self, ad_type, constraint, projection):
        return [{"Name": f"slot1@{annex}", "AnnexName": f"htcannex-{annex}", "State": "Unclaimed"} for annex in "abc"]


def ad(cluster: int, chunk: int, annex: str, attempt: int = 1) -> dict:
    return {"ClusterId": cluster, "ProcId": 0, "HtcannexRule": "train_chunk", "HtcannexSite": annex,
            "HtcannexWildcards": json.dumps({"run": "r1", "chunk": str(chunk)}), "HtcannexAttempt": attempt,
            "TargetAnnexName": f"htcannex-{annex}"}


def test_chunks_on_another_annex_or_completed_twice_are_errors(tmp_path):
    (tmp_path / ".htcannex").mkdir()
    (tmp_path / ".htcannex" / "jobs.log").write_text(
        job_events(1, "slot1@a") + job_events(2, "slot1@c") + job_events(3, "slot1@a") + job_events(4, "slot1@b"))
    ads = [ad(1, 1, "a"), ad(2, 2, "b"), ad(3, 3, "a"), ad(4, 3, "b", attempt=2)]
    source = BoardSource(tmp_path, Schedd(ads), Collector(), epochs_per_job=2)
    try:
        board = source.board()
    finally:
        source.close()
    assert [(row.chunk, row.check) for row in board.rows] == [
        (1, "ok"),
        (2, "ERROR: ran on htcannex-c, sent to htcannex-b"),
        (3, "ERROR: completed 2 times"),
    ]
    assert render(board).splitlines()[2].split()[8:] == ["ERROR:", "ran", "on", "htcannex-c,", "sent", "to", "htcannex-b"]
