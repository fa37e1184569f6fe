"""Did every epoch train exactly once, in the job and on the site the plan says?

A training job records, per epoch, what HTCondor showed it (the machine ad's AnnexName and
Name, the job ad's ClusterId.ProcId, TargetAnnexName and HtcannexWildcards). This module checks
such records against the plan (which chunk trains an epoch; the annex a job was sent to) and
against the user event log (the job ran, on that slot, and ended with exit 0). A job that
quietly retrained an earlier chunk in its sandbox (an in-job Snakemake trusting
transfer-time mtimes) shows up as epochs trained in a job submitted for another chunk.

Plain dicts in, sentences out: the workflow's `compare` (which reads checkpoints) and
`htcannex status` (which reads the event log and job ads) share it without importing torch.
"""
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import htcondor2
from htcondor2 import JobEventType

from snakemake_executor_plugin_htcannex.track.event_log import NEVER_WAIT, job_id_of

OK = "ok"
UNCHECKED = "not checked"
ERROR = "ERROR"


@dataclass
class Execution:
    """What the event log says of one job: the slots it ran in, and how it ended."""

    slots: set = field(default_factory=set)
    succeeded: bool = False


def executions(log_path: Path) -> Optional[dict[str, Execution]]:
    """job id -> Execution from a user event log; None when there is no log (a run that did
    not go through HTCondor)."""
    log_path = Path(log_path)
    if not log_path.is_file():
        return None
    jobs: dict[str, Execution] = {}
    with htcondor2.JobEventLog(str(log_path)) as log:
        for event in log.events(stop_after=NEVER_WAIT):
            job = job_id_of(event)
            if event.type == JobEventType.SUBMIT:
                jobs[job] = Execution()  # a reused id (a new pool spool) starts over
            elif event.type == JobEventType.EXECUTE:
                jobs.setdefault(job, Execution()).slots.add(event.get("SlotName"))
            elif event.type == JobEventType.JOB_TERMINATED:
                jobs.setdefault(job, Execution()).succeeded = bool(event.get("TerminatedNormally")) and event.get("ReturnValue") == 0
    return jobs


@dataclass(frozen=True)
class Check:
    """The outcome for one run: `problems` empty and `unchecked` 0 is "ok"."""

    epochs: int
    problems: tuple = ()
    unchecked: int = 0  # epochs trained outside HTCondor (no job ad): nothing to check them against
    note: str = ""

    @property
    def state(self) -> str:
        if self.problems:
            return ERROR
        return UNCHECKED if self.unchecked else OK

    def summary(self) -> str:
        if self.problems:
            return f"{ERROR}: " + "; ".join(self.problems)
        if self.unchecked:
            return f"{UNCHECKED}: {self.unchecked} of {self.epochs} epochs trained outside HTCondor (no job ad)"
        return f"{OK}: {self.epochs} epochs, each once, in its planned job and site" + (f" ({self.note})" if self.note else "")


def check_epochs(history: Iterable[dict], run: str, total_epochs: int, chunk_of_epoch: Callable[[int], int],
                 jobs: Optional[dict[str, Execution]], run_wildcard: str = "run", chunk_wildcard: str = "chunk") -> Check:
    """Each of epochs 1..total_epochs trained exactly once, by the chunk the plan gives it, in a
    job submitted for that run and chunk, on the annex that job was sent to, and (with `jobs`
    from the event log) in a job that ran in that slot and ended with exit 0."""
    history = list(history)
    findings: dict[str, list[int]] = {}

    def found(text: str, epoch: int) -> None:
        findings.setdefault(text, []).append(epoch)

    counts = Counter(e["epoch"] for e in history)
    for epoch in range(1, total_epochs + 1):
        if counts[epoch] == 0:
            found("not trained", epoch)
        elif counts[epoch] > 1:
            found(f"trained {counts[epoch]} times", epoch)
    for epoch in sorted(set(counts) - set(range(1, total_epochs + 1))):
        found(f"beyond the plan's {total_epochs} epochs", epoch)

    unchecked = 0
    for record in history:
        epoch, planned_chunk = record["epoch"], chunk_of_epoch(record["epoch"])
        if record["chunk"] != planned_chunk:
            found(f"trained by chunk {record['chunk']}, the plan says chunk {planned_chunk}", epoch)
        job = record.get("job")
        if job is None:
            unchecked += 1
            continue
        wildcards = record.get("job_wildcards") or {}
        if chunk_wildcard in wildcards and str(wildcards[chunk_wildcard]) != str(planned_chunk):
            found(f"trained in job {job}, which was submitted for chunk {wildcards[chunk_wildcard]} "
                  f"(the plan: chunk {planned_chunk})", epoch)
        if run_wildcard in wildcards and str(wildcards[run_wildcard]) != run:
            found(f"trained in job {job}, which was submitted for run {wildcards[run_wildcard]}", epoch)
        if record.get("planned_site") is not None and record["site"] != record["planned_site"]:
            found(f"trained on {record['site']}, its job {job} was sent to {record['planned_site']}", epoch)
        if jobs is None:
            continue
        execution = jobs.get(job)
        if execution is None:
            found(f"trained in job {job}, which the event log does not know", epoch)
        elif record.get("slot") not in execution.slots:
            found(f"trained in slot {record.get('slot')}, job {job} ran in {', '.join(sorted(map(str, execution.slots))) or 'no slot'} "
                  "per the event log", epoch)
        elif not execution.succeeded:
            found(f"trained in job {job}, which did not end with exit 0", epoch)
    problems = tuple(f"{epoch_list(epochs)} {text}" for text, epochs in findings.items())
    note = "" if jobs is not None or unchecked else "no event log to check jobs against"
    return Check(epochs=total_epochs, problems=problems, unchecked=unchecked, note=note)


def epoch_list(epochs: list[int]) -> str:
    epochs = sorted(set(epochs))
    return f"epoch {epochs[0]}" if len(epochs) == 1 else "epochs " + ",".join(map(str, epochs))


def chunk_check(planned_annex: Optional[str], ran_annex: Optional[str], ran_slot: Optional[str], completions: int) -> str:
    """What the access point alone can check of one finished chunk (`htcannex status`): it
    completed once in its latest Snakemake run, on the annex its job was sent to. Whether the
    job trained only its own epochs is in the checkpoint: the workflow's compare checks that."""
    problems = []
    if completions > 1:
        problems.append(f"completed {completions} times")
    if planned_annex and ran_annex and ran_annex != planned_annex:
        problems.append(f"ran on {ran_annex}, sent to {planned_annex}")
    if problems:
        return f"{ERROR}: " + "; ".join(problems)
    if planned_annex and not ran_annex:
        return f"{UNCHECKED}: annex of slot {ran_slot} unknown (annex gone)"
    return OK
