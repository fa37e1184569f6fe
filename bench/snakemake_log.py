"""Snakemake's own view of each job, read from its log: when it issued the job, which
HTCondor job it became, when it saw it finish.

Snakemake stamps its log with whole seconds (`[Wed Dec  2 15:08:45 2026]`), so these
times have 1 s resolution; medians over many jobs are still meaningful.
"""
import re
import time
from dataclasses import dataclass
from typing import Optional

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_RULE = re.compile(r"^(local)?rule (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_OUTPUT = re.compile(r"^\s+output: (.+)$")
_SUBMITTED = re.compile(r"^Submitted job (\d+) as HTCondor job (\d+\.\d+)")
_FINISHED = re.compile(r"^Finished jobid: (\d+)")


@dataclass
class SnakemakeJob:
    jobid: int
    rule: str
    output: str = ""
    issued: float = 0.0
    condor_id: Optional[str] = None
    finished: Optional[float] = None


def _seconds(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%a %b %d %H:%M:%S %Y"))


def parse(log_text: str) -> dict[int, SnakemakeJob]:
    """The jobs of one Snakemake run, by Snakemake job id."""
    jobs: dict[int, SnakemakeJob] = {}
    stamp = 0.0
    rule, output = None, ""
    for line in log_text.splitlines():
        if match := _STAMP.match(line):
            stamp = _seconds(match.group(1))
        elif match := _RULE.match(line):
            rule, output = match.group(2), ""
        elif rule and (match := _OUTPUT.match(line)):
            output = match.group(1)
        elif rule and (match := _JOBID.match(line)):
            jobid = int(match.group(1))
            jobs[jobid] = SnakemakeJob(jobid, rule, output, issued=stamp)
            rule = None
        elif match := _SUBMITTED.match(line):
            jobs[int(match.group(1))].condor_id = match.group(2)
        elif match := _FINISHED.match(line):
            job = jobs.get(int(match.group(1)))
            if job is not None:
                job.finished = stamp
    return jobs
