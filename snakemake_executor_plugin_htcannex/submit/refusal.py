"""A job htcannex refuses before it is submitted fails once, and a secret in it is printed nowhere.

A refusal (a value that cannot go into a submit description, a secret, a request no site of the
rotation can run) is judged on values a retry evaluates the same way: retrying it only prints the
same error again, and for a secret, the secret again. Snakemake retries every failure an executor
reports (`report_job_error` -> JobScheduler._handle_error, while `restart_times > attempt - 1`);
its executor interface has no final failure, and an exception from `run_job` cancels the whole
run. So a refused job's attempt is marked its last (`make_final`) before it is reported.

Snakemake's report of a failed job shows the rule's shell command as it is (Job.log_error's
`shellcmd`): for a job whose command holds a secret htcannex prints the report itself, with the
command withheld (`withheld_report`). Snakemake's `--printshellcmds` prints the command when the
job starts, before any executor sees it: that one htcannex cannot withhold.
"""
from typing import Optional

from snakemake_interface_executor_plugins.jobs import JobExecutorInterface

from snakemake_executor_plugin_htcannex.secrets import contains_secret, redact, secret_values


def make_final(job: JobExecutorInterface) -> None:
    """Snakemake does not retry `job`'s failure reported next: its attempt becomes its last."""
    job.attempt = max(job.attempt, job.restart_times + 1)


def withheld_report(job: JobExecutorInterface, msg: Optional[str]) -> Optional[str]:
    """Snakemake's error report for `job` (not a group) without its shell command, when that command
    holds a secret; None when Snakemake's own report may be printed."""
    if not contains_secret(job.shellcmd or "", secret_values()):
        return None
    lines = [f"Error in rule {job.rule.name}:", f"    jobid: {job.jobid}"]
    for label, files in (("input", job.input), ("output", job.output), ("log", job.log)):
        if files:
            lines.append(f"    {label}: {redact(', '.join(map(str, files)))}")
    lines.append("    shell: (withheld: it holds a secret)")
    if msg:
        lines.append(f"    message: {redact(msg)}")
    return "\n".join(lines)
