"""A Snakemake job -> a `JobSpec` (plain values that description.build_submit turns into a submit
description): what it transfers, the command HTCondor runs, and its resources.

The command is Snakemake's own (`format_job_exec`) or, for a rule that runs without Snakemake in
the job, the rule's shell command or prepared script (direct_command.py), wrapped so that it runs where the workdir is in the sandbox, creates
the logs the rule did not write, and exits with a self-checkpoint's exit code: the Snakemake
process inside a job exits 1 whatever its script exited with, so HTCondor would never see the
code; `with_checkpoint_exit` makes the job exit with the code a script wrote to the marker file
(paths.CHECKPOINT_EXIT_MARKER, named to the job by $HTCANNEX_CHECKPOINT_EXIT_MARKER).
"""
import os
import shlex
from dataclasses import dataclass
from typing import Optional

from snakemake.io import is_flagged
from snakemake_interface_executor_plugins.jobs import JobExecutorInterface

from snakemake_executor_plugin_htcannex.paths import CHECKPOINT_EXIT_MARKER, CHECKPOINT_EXIT_MARKER_VARIABLE
from snakemake_executor_plugin_htcannex.submit import osdf_transfer, output_directories, transfer_items, transfer_names
from snakemake_executor_plugin_htcannex.submit.description import JobSpec, SubmitOptions
from snakemake_executor_plugin_htcannex.submit.request import with_room_for_snakemake
from snakemake_executor_plugin_htcannex.submit_language import needs_stand_in

# Output flags whose file does not outlive the job (see products).
PRODUCTS_WITHOUT_FILE = ("pipe", "service")


@dataclass(frozen=True)
class JobCommand:
    """What a job runs: `command`, by `shell`."""

    shell: str  # on the execute point
    command: str
    # False: the rule's own command or prepared script, without Snakemake in the job (direct_command.py)
    runs_snakemake: bool = True
    files: tuple[str, ...] = ()  # what the command needs besides the job's inputs (workdir-relative)
    prepared_script: Optional[str] = None  # written for this job here; removed when the job is done
    # Shell run once the command succeeded and its logs exist (osdf_transfer.in_job_steps: the OSDF
    # outputs' sidecars, a log among them).
    after: str = ""
    container_image: Optional[str] = None  # the rule's container, for HTCondor to run it in (direct_command.py)


def job_spec(job: JobExecutorInterface, command: JobCommand, options: SubmitOptions,
             sandbox_storage_prefix: str) -> JobSpec:
    """`job` as a JobSpec, running `command`: Snakemake's for the job (`format_job_exec`) or one
    without Snakemake (direct_command.py)."""
    outputs = products(job)
    if options.shared_fs:
        files = dict(inputs=[*job.input, *command.files], outputs=outputs)
    else:
        # OSDF objects move between origin and execute point as URL transfers.
        transfers = osdf_transfer.plan(job.input, outputs, sandbox_storage_prefix=sandbox_storage_prefix)
        files = dict(inputs=[*transfers.inputs, *command.files], outputs=transfers.outputs,
                     output_remaps=transfers.output_remaps, environment=transfers.environment)
    resources = dict(job.resources.items())
    before, after, flat_input = ("", "", None) if options.shared_fs else sandbox_steps(files, command, options)
    command_and_logs = _creating_logs(command.command, _logs(job))
    if command.after:
        command_and_logs = f"{command_and_logs} && {command.after}"
    if after:
        command_and_logs = f"{command_and_logs} && {_at_sandbox_top(after, options)}"
    wrapped = _in_sandbox_workdir(with_checkpoint_exit(command_and_logs), options.sandbox_workdir)
    if before:
        wrapped = f"{before} && {wrapped}"
    return JobSpec(
        rule=rule_label(job),
        jobid=job.jobid,
        argv=[command.shell, "-c", wrapped],
        wildcards=wildcards_of(job),
        resources=with_room_for_snakemake(resources) if command.runs_snakemake else resources,
        threads=job.threads,
        attempt=job.attempt,
        ships_workflow_sources=command.runs_snakemake,
        needs_output_directories=not command.runs_snakemake,
        logs=tuple(str(log) for log in _logs(job)),
        prepared_script=command.prepared_script,
        container_image=command.container_image,
        flat_input=flat_input,
        **files,
    )


def rule_label(job: JobExecutorInterface) -> str:
    """What htcannex calls the job in messages and in its job ad's HtcannexRule: the rule's name, or
    for a group job the rules it runs and the user's group name. Snakemake's own name for a group job
    (`<groupid>_<rules>`) is none of them: the group id of a pipe's group is a fresh UUID per run,
    which would also change the job's signature (recovery) from one Snakemake run to the next."""
    if not job.is_group():
        return job.name
    rules = ", ".join(sorted({member.rule.name for member in job.jobs}))
    if any(member.rule.group is not None for member in job.jobs):
        return f"{rules} (group {job.groupid})"
    return f"{rules} (grouped by a pipe)"


def wildcards_of(job: JobExecutorInterface) -> dict:
    # A group job spans several rules and has no wildcards of its own; it is
    # placed with policy "any" unless a profile names the group.
    return {} if job.is_group() else dict(job.wildcards.items())


def _members(job: JobExecutorInterface) -> list:
    return list(job.jobs) if job.is_group() else [job]


def products(job: JobExecutorInterface) -> list:
    """What must come back: outputs, logs and benchmarks, for a group of every member job (the
    submit side checks the group's intermediate files too, not only what leaves the group).

    Not what the job's Snakemake leaves no file for: a pipe or service (a FIFO or socket between
    two members, gone when they end), and a temp() output another member of the group reads
    (dag.handle_temp removes it once that member is done, as the local executor would). HTCondor
    holds a job (12/2) whose listed output file is missing."""
    members = _members(job)
    read_in_group = {str(path) for member in members for path in member.input}
    return list(dict.fromkeys(
        product for member in members for product in member.products()
        if not any(is_flagged(product, flag) for flag in PRODUCTS_WITHOUT_FILE)
        and not (is_flagged(product, "temp") and str(product) in read_in_group)))


def missing_products(job: JobExecutorInterface) -> list[str]:
    """The job's local products that are not here (its storage ones went up from the job)."""
    return [str(product) for product in products(job) if not product.is_storage and not os.path.exists(product)]


def _logs(job: JobExecutorInterface) -> list:
    return list(dict.fromkeys(log for member in _members(job) for log in member.log))


def _creating_logs(command: str, logs: list) -> str:
    """`command`, then (if it succeeded) an empty file for each log it did not write.

    Snakemake does not require a rule to write its log, but HTCondor holds a job
    whose listed output files are missing, and the logs are listed so they come back.
    """
    if not logs:
        return command
    names = " ".join(shlex.quote(str(log)) for log in logs)
    return (f'{command} && for log in {names}; do [ -e "$log" ] || '
            f'{{ mkdir -p "$(dirname "$log")" && : > "$log"; }}; done')


def sandbox_steps(files: dict, command: JobCommand, options: SubmitOptions) -> tuple[str, str, str | None]:
    """For a job of `files` (inputs, outputs: workdir-relative) running `command`: (shell run at the top of
    the sandbox before the command, shell run after it succeeded, the input sent flat) that moves the files
    whose names a transfer list cannot hold from and to their stand-ins (transfer_names.py), makes the output
    directories of a job without Snakemake where their tree does not travel (output_directories.py), and
    moves a lone input sent at the top of the sandbox to its path (transfer_items.py). Nearly every job has
    none: only names that may need one are looked at."""
    every_name = needs_stand_in(options.sandbox_workdir or "")  # it is in every sandbox path

    def in_sandbox(names) -> list[str]:
        return [path for name in names
                if (path := transfer_names.in_sandbox(name, options.workdir, options.initial_dir)) is not None]

    def awkward(names) -> list[str]:
        return in_sandbox(name for name in names if every_name or needs_stand_in(str(name)))

    sources = options.workflow_sources if command.runs_snakemake else ()
    before, after = transfer_names.in_job_steps(awkward([*files["inputs"], *sources]), awkward(files["outputs"]),
                                                options.workdir, options.initial_dir)
    directories = []
    if not command.runs_snakemake and not output_directories.sent_as_tree(options.few_transfer_items, options.workdir):
        directories = output_directories.of(in_sandbox(files["outputs"]))
    flat = None
    if options.few_transfer_items:
        entries = list(dict.fromkeys(in_sandbox([*files["inputs"], *sources])))
        flat = transfer_items.sent_flat(entries, in_sandbox(files["outputs"]), options.initial_dir)
    if flat is not None:
        directories = sorted({*directories, *output_directories.of([flat])})
    before = " && ".join(filter(None, (before, output_directories.in_job(directories),
                                       flat and transfer_items.into_place(flat))))
    return before, after, flat


def _at_sandbox_top(command: str, options: SubmitOptions) -> str:
    """`command`, run from the job's working directory at the top of the sandbox."""
    if options.sandbox_workdir is None:
        return command
    return f"(cd {shlex.quote(os.path.relpath(options.initial_dir, options.workdir))} && {command})"


def _in_sandbox_workdir(command: str, where: str | None) -> str:
    """`command`, run where the workdir is in the sandbox (below it when sources came from outside)."""
    return command if where is None else f"cd {shlex.quote(where)} && {command}"


def with_checkpoint_exit(command: str) -> str:
    """`command`, then exit with the code in the marker file if the job's script left one (the
    marker is removed), else with the command's own status. HTCondor restarts a self-checkpointing
    job in the same sandbox, and a rule's shell command run without Snakemake ends the shell with
    its own `exit 85` before the removal: a marker left there is removed before the command too (`rm`, a
    process, only when there is one)."""
    marker = CHECKPOINT_EXIT_MARKER
    return (f"export {CHECKPOINT_EXIT_MARKER_VARIABLE}={marker}; [ ! -f {marker} ] || rm -f {marker}; {command}; status=$?; "
            f"if [ -f {marker} ]; then code=$(cat {marker}); rm -f {marker}; exit $code; fi; exit $status")
