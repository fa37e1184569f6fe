"""Per chunk: its attempts (one HTCondor job each) added up.

A chunk is what JobFigures.chunk_key names: rule/run/chunk where the job ads say, else the DAG
node, else the job itself. Retries in the same or a later Snakemake run are further attempts.
"""
from dataclasses import dataclass
from typing import Optional


@dataclass
class ChunkSummary:
    chunk_key: str
    attempts: int
    sites: str  # where its attempts ran, in order ("a b" for a retry that moved)
    state: str  # of its latest attempt
    queue_wait_s: float
    annex_wait_s: float
    held_s: float
    transfer_s: float
    compute_s: float
    badput_s: float
    lost_attempts_s: float  # compute of attempts that did not succeed
    end_to_end_s: Optional[float]  # first submit to the latest attempt's end


def chunk_summaries(jobs: list) -> list:
    by_chunk: dict = {}
    for job in jobs:
        by_chunk.setdefault(job.chunk_key, []).append(job)
    return [_summary(key, attempts) for key, attempts in by_chunk.items()]


def _summary(key: str, attempts: list) -> ChunkSummary:
    latest = attempts[-1]
    starts = [job.submitted_at for job in attempts if job.submitted_at is not None]
    return ChunkSummary(
        chunk_key=key, attempts=len(attempts),
        sites=" ".join(job.site or "-" for job in attempts if job.runs),
        state=latest.state,
        queue_wait_s=sum(job.queue_wait_s for job in attempts),
        annex_wait_s=sum(job.annex_wait_s for job in attempts),
        held_s=sum(job.held_s for job in attempts),
        transfer_s=sum(job.transfer_in_s + job.transfer_out_s for job in attempts),
        compute_s=sum(job.compute_s for job in attempts),
        badput_s=sum(job.badput_s for job in attempts),
        lost_attempts_s=sum(job.compute_s for job in attempts if job.state != "done"),
        end_to_end_s=latest.finished_at - min(starts) if latest.finished_at is not None and starts else None,
    )
