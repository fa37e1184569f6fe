"""A job's own Snakemake runs exactly that job's step, whatever modification times its sandbox has.

A rule that needs Snakemake in its job (direct_command.py says which: run: blocks, non-OSDF storage files,
...) runs one inside its HTCondor job (`--mode remote`, with
`--target-jobs` naming the job, `--force`, `--allowed-rules` its rules). That Snakemake builds a
DAG from the target back through every rule in `--allowed-rules`, and in a chain of one rule
(train_chunk k needs train_chunk k-1's checkpoint) that DAG holds the upstream chunks too. It then
decides for each of them whether it needs to run (snakemake/dag.py, update_needrun):
- "updated input": an input newer than the job's oldest output. HTCondor gives every input the
  second it arrived as mtime (file_transfer.cpp), so the data set can look newer than the
  previous checkpoint. Snakemake 9.27 checks this unconditionally: `--rerun-triggers` accepts
  `mtime` but update_needrun never reads it, so leaving it out turns nothing off.
- "code changed" (rerun trigger `code`): an output not newer than the rule's script; the shipped
  script and the transferred checkpoint arrive in the same second, which counts as older.
- params/input/software-env triggers need the job's metadata, which a sandbox never has.
- missing outputs (chunk k-2's checkpoint is not in the sandbox) count only for a job that
  already needs to run.
Once one upstream job "needs" to run, the missing outputs pull in the whole chain: chunk 3's job
retrained chunks 1 and 2 on chunk 3's site (seen on a real HTCondor 25.14 pool).

The main Snakemake has already decided that the upstream jobs are done; inside the job the two
mtime-based reasons are turned off with Snakemake's own options: `--consider-ancient` marks every
input item of the job's rules as ancient (an ancient input never counts as updated, whatever its
mtime), and `--rerun-triggers` is the main process's set without `code`. No reason is then left
for an upstream job, and only the forced target runs. The target itself is unaffected: `--force`.
"""
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface
from snakemake_interface_executor_plugins.utils import format_cli_arg

# Inside a job: always a trigger to name (--rerun-triggers takes one at least); `mtime` is a
# no-op in Snakemake 9.27 and, where a later one honours it, the ancient inputs cover it.
IN_JOB_TRIGGERS = ("mtime", "params", "input", "software-env")


def in_job_args(job: JobExecutorInterface, workflow) -> str:
    """`--consider-ancient` for every input item (by position and by name) of the job's rules."""
    items = []
    for name in sorted(job.rules):
        rule_input = workflow.get_rule(name).input
        positions = [str(index) for index in range(len(rule_input))]
        names = sorted(rule_input.keys())  # the keyword items
        if positions or names:
            items.append(f"{name}={','.join(positions + names)}")
    return format_cli_arg("--consider-ancient", items, skip=not items)


def in_job_rerun_triggers(workflow) -> str:
    """The main process's rerun triggers without `code` (given after Snakemake's own, so it wins)."""
    main = {trigger.item_to_choice() for trigger in workflow.rerun_triggers}
    return format_cli_arg("--rerun-triggers", [trigger for trigger in IN_JOB_TRIGGERS
                                               if trigger in main or trigger == "mtime"])
