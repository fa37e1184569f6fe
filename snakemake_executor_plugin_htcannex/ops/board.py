"""The status board: runs x chunks (site, state, epochs, time) and a per-site epoch-time profile.

Sources, all read-only:
- the run's one event log (`.htcannex/jobs.log`), read incrementally with
  tracking.EventLogTracker (htcondor2.JobEventLog): each job's state, the annex
  it runs on, and the submit/start/finish times;
- the job ads (schedd.query for queued jobs, schedd.history for finished ones,
  through the seam) for what the executor recorded about each job:
  `HtcannexRule`, `HtcannexWildcards` (which give the run and the chunk),
  `HtcannexSite`, `HtcannexAttempt`;
- the collector's annex slots (one query per refresh): which annexes are up,
  how many slots are busy, and how long until each ends (AnnexLifetimeEnd).

Epoch times are a chunk's wall time (its last execution, start to finish)
divided by epochs_per_job; the board says so (`epoch_time_source`). Training
checkpoints carry per-epoch wall times too, but reading them needs the
workflow's own code, which this operator tool does not import.

A chunk's epochs count from its rule's first chunk: workflows number chunks
from 0 (the rotation's examples) or from 1 (protein_lm), so the first chunk is
the lowest one of the rule in the event log (a chain submits it before the
others) unless the caller says (`first_chunk`).

A row's CHECK (provenance.chunk_check): a finished chunk completed once in its latest
Snakemake run, on the annex its job was sent to (TargetAnnexName) -- the annex of the slot
its execute event names, from the collector while the annex is up. Whether a job trained only
its own epochs is recorded in the checkpoints; the workflow's compare checks that.

A row counts the submissions of the chunk's latest Snakemake run only: one
working directory keeps one event log across runs (successive `make demo`s),
and Snakemake numbers attempts from 1 again in every run, so the latest
attempt-1 job starts the count.
"""
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import mean
from typing import Optional

import htcondor2

from snakemake_executor_plugin_htcannex import paths

from snakemake_executor_plugin_htcannex.annex.ledger import AnnexLedger
from snakemake_executor_plugin_htcannex.ops import provenance
from snakemake_executor_plugin_htcannex.ops.driver_status import DriverSource, DriverStatus
from snakemake_executor_plugin_htcannex.ops.driver_status import render as render_driver
from snakemake_executor_plugin_htcannex.sites.rotation import run_order_key
from snakemake_executor_plugin_htcannex.schedd import job_id
from snakemake_executor_plugin_htcannex.secrets import redact
from snakemake_executor_plugin_htcannex.track.event_log import PHASE_WORDS, EventLogTracker, JobPhase

AD_PROJECTION = ["ClusterId", "ProcId", "HtcannexRule", "HtcannexWildcards", "HtcannexSite", "HtcannexAttempt",
                 "TargetAnnexName"]


@dataclass
class ChunkRow:
    rule: str
    run: Optional[str]
    chunk: Optional[int]
    job: str  # the latest HTCondor job for this chunk
    jobs: int  # how many were submitted for it in its latest Snakemake run (attempts)
    site: Optional[str]
    annex: Optional[str]  # where it runs or last ran
    state: str
    epochs: Optional[str]  # "5-8" for chunk 1 with 4 epochs per job
    seconds: Optional[float]  # running: so far; done: start to finish; idle/held: waiting so far
    hold_reason: Optional[str] = None
    check: str = "-"  # provenance of a finished chunk (module docstring)


@dataclass
class SiteProfile:
    site: str
    chunks_done: int
    mean_chunk_s: float
    mean_epoch_s: Optional[float]


@dataclass
class AnnexRow:
    annex: str
    slots: int
    busy: int
    # Until AnnexLifetimeEnd where the slots say (the embedded pool's); a real pilot's do not, and then until
    # the end of the lifetime this directory requested it for (the ledger), if it did.
    seconds_left: Optional[float]


@dataclass
class Board:
    rows: list = field(default_factory=list)
    sites: list = field(default_factory=list)
    annexes: list = field(default_factory=list)  # the annexes that are up (collector)
    epoch_time_source: str = ""
    first_chunks: dict = field(default_factory=dict)  # rule -> the chunk that trains epoch 1
    generated_at: float = 0.0
    driver: Optional[DriverStatus] = None  # the Snakemake driver `htcannex submit` started, if any

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


class BoardSource:
    """Keeps the event log open between refreshes so each one reads only new events."""

    def __init__(self, workdir: Path, schedd, collector=None, run_wildcard: str = "run",
                 chunk_wildcard: str = "chunk", epochs_per_job: Optional[int] = None,
                 first_chunk: Optional[int] = None):
        self.workdir = workdir
        self.tracker = EventLogTracker(paths.event_log(workdir))
        self.driver = DriverSource(workdir)
        self.schedd, self.collector = schedd, collector
        self.run_wildcard, self.chunk_wildcard = run_wildcard, chunk_wildcard
        self.epochs_per_job = epochs_per_job
        self.first_chunk = first_chunk  # None: the lowest chunk of each rule in the event log
        self._ads: dict = {}  # job id -> what the executor recorded; finished jobs' ads never change
        self._slot_annexes: dict = {}  # slot name -> AnnexName, of every annex slot seen up

    def close(self) -> None:
        self.tracker.close()
        self.driver.close()

    def board(self, now: Optional[float] = None) -> Board:
        now = time.time() if now is None else now
        self.tracker.poll()
        self._refresh_ads()
        chunks = self._chunks()
        first_chunks = self._first_chunks(chunks)
        annexes = self._annexes(now)
        rows = [self._row(key, jobs, first_chunks.get(key[0]), now) for key, jobs in chunks.items()]
        rows.sort(key=lambda row: (row.rule, _run_order(row.run), row.chunk if row.chunk is not None else -1))
        return Board(rows=rows, sites=self._profile(rows), annexes=annexes,
                     epoch_time_source=self._source(), first_chunks=first_chunks, generated_at=now,
                     driver=self.driver.status())

    def _annexes(self, now: float) -> list:
        if self.collector is None:
            return []
        by_annex: dict = {}
        ends = {request.name: request.requested_at + request.lifetime_s
                for request in AnnexLedger(paths.annex_ledger(self.workdir)).requests() if request.live(now)}
        for slot in self.collector.query(htcondor2.AdTypes.Startd, constraint="AnnexName isnt undefined",
                                         projection=["Name", "AnnexName", "State", "AnnexLifetimeEnd", "SlotType"]):
            self._slot_annexes[slot["Name"]] = slot["AnnexName"]
            row = by_annex.setdefault(slot["AnnexName"], AnnexRow(slot["AnnexName"], 0, 0, None))
            # A real pilot's node is one partitionable slot, and each job it runs a dynamic slot carved from it.
            dynamic = slot.get("SlotType") == "Dynamic"
            row.slots += not dynamic
            row.busy += dynamic or (slot.get("State") == "Claimed" and slot.get("SlotType") != "Partitionable")
            end = slot.get("AnnexLifetimeEnd", ends.get(slot["AnnexName"]))
            if end is not None:
                row.seconds_left = end - now
        return [by_annex[name] for name in sorted(by_annex)]

    def _refresh_ads(self) -> None:
        unknown = [job for job in self.tracker.jobs if job not in self._ads]
        if not unknown:
            return
        # Only the clusters not seen yet: a long-lived access point's history is large.
        clusters = ", ".join(sorted({job.split(".")[0] for job in unknown}))
        constraint = f"HtcannexRule isnt undefined && member(ClusterId, {{{clusters}}})"
        for ad in self.schedd.query(constraint, AD_PROJECTION) + self.schedd.history(constraint, AD_PROJECTION):
            job = job_id(ad)
            if job in self.tracker.jobs:
                self._ads[job] = ad

    def _chunks(self) -> dict:
        """(rule, run, chunk) -> its jobs of its latest Snakemake run, (record, ad), oldest first."""
        jobs: dict = {}
        for job, record in self.tracker.jobs.items():
            ad = self._ads.get(job)
            if ad is None:
                continue  # not an htcannex job, or its ad is gone
            wildcards = json.loads(ad.get("HtcannexWildcards", "{}"))
            key = (ad["HtcannexRule"], wildcards.get(self.run_wildcard), wildcards.get(self.chunk_wildcard))
            jobs.setdefault(key, []).append((record, ad))
        return {key: _latest_snakemake_run(submitted) for key, submitted in jobs.items()}

    def _first_chunks(self, chunks: dict) -> dict:
        """rule -> the chunk number that trains epoch 1."""
        first: dict = {}
        for rule, _, chunk in chunks:
            number = _chunk_number(chunk)
            if number is not None:
                first[rule] = min(number, first.get(rule, number))
        return first if self.first_chunk is None else {rule: self.first_chunk for rule in first}

    def _row(self, key, jobs: list, first_chunk: Optional[int], now: float) -> ChunkRow:
        rule, run, chunk = key
        record, ad = jobs[-1]
        chunk = _chunk_number(chunk)
        epochs = None
        if chunk is not None and self.epochs_per_job:
            done_before = (chunk - first_chunk) * self.epochs_per_job
            epochs = f"{done_before + 1}-{done_before + self.epochs_per_job}"
        if record.phase is JobPhase.RUNNING:
            seconds = now - record.started_at
        elif record.phase.finished:
            seconds = (record.finished_at - record.started_at
                       if record.finished_at is not None and record.started_at is not None else None)
        else:
            seconds = now - record.submitted_at
        ran_on = record.annex or self._slot_annexes.get(record.slot)
        annex = ran_on or ad.get("TargetAnnexName")
        check = "-"
        if chunk is not None and record.phase is JobPhase.SUCCEEDED and ad.get("TargetAnnexName"):  # a rotated chunk
            completions = sum(other.phase is JobPhase.SUCCEEDED for other, _ in jobs)
            check = provenance.chunk_check(ad.get("TargetAnnexName"), ran_on, record.slot, completions)
        return ChunkRow(rule=rule, run=run, chunk=chunk, job=record.job_id, jobs=len(jobs), site=ad.get("HtcannexSite"),
                        annex=annex, state=PHASE_WORDS[record.phase], epochs=epochs, seconds=seconds,
                        hold_reason=redact(record.hold_reason) if record.hold_reason else None, check=check)

    def _profile(self, rows: list) -> list:
        by_site: dict = {}
        for row in rows:
            if row.state == "done" and row.chunk is not None and row.seconds is not None:
                by_site.setdefault(row.site or "(any)", []).append(row.seconds)
        return [SiteProfile(site, len(times), mean(times),
                            mean(times) / self.epochs_per_job if self.epochs_per_job else None)
                for site, times in sorted(by_site.items())]

    def _source(self) -> str:
        if self.epochs_per_job:
            return f"chunk wall time (last execution, start to finish) / epochs_per_job={self.epochs_per_job}"
        return "chunk wall time only: epochs_per_job unknown (pass --epochs-per-job)"


def render(board: Board) -> str:
    """The board as a terminal table."""
    header = ["RULE", "RUN", "CHUNK", "EPOCHS", "SITE", "STATE", "TIME", "JOB", "CHECK", "NOTE"]
    table = [header]
    lines = render_driver(board.driver)
    for row in board.rows:
        note = (f"{row.jobs} submissions" if row.jobs > 1 else "") + (f" {row.hold_reason}" if row.hold_reason else "")
        table.append([row.rule, row.run or "-", "-" if row.chunk is None else str(row.chunk), row.epochs or "-",
                      row.site or "-", row.state, duration(row.seconds), row.job, row.check, note.strip()[:60]])
    lines += columns(table)
    if any(row.epochs for row in board.rows):
        lines.append("EPOCHS count from each rule's first chunk: " + ", ".join(
            f"{rule} {chunk}" for rule, chunk in sorted(board.first_chunks.items())) + " (--first-chunk to set)")
    lines += ["", "per-site epoch time (" + board.epoch_time_source + ")"]
    profile = [["SITE", "CHUNKS DONE", "MEAN CHUNK", "MEAN EPOCH"]] + [
        [site.site, str(site.chunks_done), duration(site.mean_chunk_s), duration(site.mean_epoch_s)]
        for site in board.sites]
    lines += columns(profile) if board.sites else ["(no chunk has finished yet)"]
    annexes = [["ANNEX", "SLOTS", "BUSY", "TIME LEFT"]] + [
        [annex.annex, str(annex.slots), str(annex.busy), duration(annex.seconds_left)] for annex in board.annexes]
    lines += ["", "annexes up"] + (columns(annexes) if board.annexes else ["(none)"])
    return "\n".join(lines)


def columns(table: list) -> list:
    """Rows of cells as left-aligned text columns (the status board and `htcannex report`)."""
    widths = [max(len(row[column]) for row in table) for column in range(len(table[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in table]


def duration(seconds: Optional[float]) -> str:
    """Seconds as 1h05m or 4m07s; "-" for unknown."""
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


def _latest_snakemake_run(submitted: list) -> list:
    """The jobs from the latest attempt-1 job on: Snakemake counts attempts from 1 in every run."""
    # Cluster ids grow with every submit; the event log's times have 1 s steps.
    submitted = sorted(submitted, key=lambda pair: (pair[1]["ClusterId"], pair[1]["ProcId"]))
    starts = [index for index, (_, ad) in enumerate(submitted) if ad.get("HtcannexAttempt") == 1]
    return submitted[starts[-1]:] if starts else submitted


def _chunk_number(chunk) -> Optional[int]:
    return int(chunk) if chunk is not None and str(chunk).isdecimal() else None


def _run_order(run: Optional[str]) -> tuple:
    # The rotation's plan order (2 before 10), jobs of rules without a run last.
    return (1,) if run is None else (0, *run_order_key(run))
