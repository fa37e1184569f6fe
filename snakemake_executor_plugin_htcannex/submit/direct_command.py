"""Jobs that run their rule's code without a Snakemake process in the HTCondor job.

Every Snakemake remote executor runs a whole Snakemake in each job to execute one rule:
about a second of CPU to import Snakemake and its plugins and rebuild the DAG
(docs/benchmarks.md), longer than many rules run. Two kinds of rule need none of it:

- A plain `shell:` rule: its command is already formatted on the submit side
  (`job.shellcmd`, with Snakemake's own formatting of input, output, params, wildcards,
  threads and resources), and what the job's Snakemake would do around it is making the
  output directories (made for the job instead: output_directories.py) and running it with
  Snakemake's shell prefix (`set -euo pipefail;` under bash).
- A `script:` rule with a Python script: what the job's Snakemake would run is the script
  with Snakemake's preamble (the `snakemake` object with input, output, params, wildcards,
  threads, resources, log and config, pickled into it, and the script's directory on
  sys.path). That preamble is Snakemake's own (snakemake.script.PythonScript), made on the
  submit side and written with the script to .htcannex/scripts/; the job runs it with the
  Python a job's Snakemake would run in (Runtime.job_python), and the script's directory travels with it (what
  Snakemake ships with a script: its package, next to it). Without a DAG in the job no
  upstream job can rerun there, whatever mtimes file transfer gave the inputs (one_step.py).

Outputs come back by HTCondor file transfer, which holds a job whose listed output is
missing (tracking reports that as a failed command), the submit side checks them as for any
job, and the job exits with the rule's own exit code.

OSDF objects (the osdf storage provider's files) need no Snakemake either: HTCondor moves
their bytes by URL transfer (osdf_transfer.py), and the job's Snakemake only moves each landed
input to its storage-local path, checking it against its sidecar, and writes each output's
sidecar. The job's shell does that (osdf_transfer.in_job_steps) when the command's paths, made
here, are the paths the job has: the remote job's storage prefix is the local one, relative.

Everything else still gets Snakemake in the job; `NeedsSnakemake` says why (the executor logs
it at debug level): run, notebook, wrapper, cwl and template rules, and scripts in other
languages (R, R Markdown, Julia, Rust, bash, xonsh, hy: Snakemake runs those with their own
interpreters and preambles); a script from a URL; group jobs; conda and module environments
under --software-deployment-method conda or env-modules (without, Snakemake ignores them, and so
does the job); benchmarks, shadow directories, pipes and services; outputs with a flag outside
FLAGS_WITHOUT_SNAKEMAKE (below: protected, ensure, directory, touch, ...); files of any other
storage provider (the job's Snakemake maps them to local paths and moves their bytes); OSDF
objects whose paths in the job differ from those in the command (--remote-job-local-storage-prefix
set apart from the local one, or an absolute one: outside the sandbox) or on a shared filesystem
(no URL transfers there: the job's Snakemake retrieves and stores them); the `tmpdir` resource in
a command or script, which must be the execute point's, not the submit side's; a shell other
than bash or sh; and a multi-line shell command.

A rule's `container:` needs no Snakemake: with --software-deployment-method apptainer the job is
HTCondor's container universe with that image (JobCommand.container_image), which the execute
point's Apptainer runs the command in, pulling or receiving the image as for the profile's
--htcannex-container-image; without that method Snakemake ignores the container, and so does the
job. (A job that keeps its Snakemake for another reason runs it as before: that Snakemake runs
Apptainer itself, which the execute point must then have on its PATH.)
"""
import dataclasses
import os
import shlex
import uuid
from pathlib import PurePosixPath

from snakemake.script import PythonScript, get_source
from snakemake.shell import shell
from snakemake.sourcecache import LocalSourceFile
from snakemake_interface_executor_plugins.settings import DeploymentMethod

from snakemake_executor_plugin_htcannex import paths

from snakemake_executor_plugin_htcannex.submit import osdf_transfer
from snakemake_executor_plugin_htcannex.submit.description import SubmitOptions
from snakemake_executor_plugin_htcannex.submit.job_spec import JobCommand
from snakemake_executor_plugin_htcannex.submit_language import CONTROL_CHARACTERS

# The only output flags a job without Snakemake may have: the main Snakemake carries them out itself
# (temp: dag.handle_temp after the job; report: `snakemake --report`) or they only say where a file
# lives (local: not through the default storage provider; storage_object: a storage file, judged
# by _osdf_steps).
# Every other flag (protected, ensure, directory, touch, update, pipe, service, nodelocal, and any a
# later Snakemake adds) is applied by the Snakemake process that ran the job: without a shared
# filesystem, Job.postprocess runs in the job (remote_exec) and the main process only waits for the
# files. So such a job keeps its Snakemake rather than htcannex copying Job.postprocess (its order:
# touch, log, output check with ensure's non-empty and checksum tests, unshadow, storage, protected,
# and update's restore on failure) and keeping that copy in step with each Snakemake release.
FLAGS_WITHOUT_SNAKEMAKE = frozenset({"temp", "report", "local", "storage_object"})
# Where the shells Snakemake may run are on any execute point.
SHELLS = {"bash": "/bin/bash", "sh": "/bin/sh"}
# The one shell that runs a prepared script's job.
SCRIPT_SHELL = "/bin/sh"


class NeedsSnakemake(Exception):
    """Why a job runs a Snakemake process in its HTCondor job."""


def direct_command(job, workflow, options: SubmitOptions, python: str) -> JobCommand:
    """The command that runs `job` without Snakemake (a script with `python`, the job's); raises
    NeedsSnakemake when it needs it."""
    deployment = workflow.deployment_settings.deployment_method
    _check_runs_alone(job, deployment)
    osdf = _osdf_steps(job, workflow, options, python)
    if job.is_shell:
        command = _shell_command(job)
    elif job.is_script:
        command = _script_command(job, workflow, options, python)
    else:
        raise NeedsSnakemake("its code is a run: block, notebook, wrapper, cwl or template, which Snakemake runs")
    return dataclasses.replace(command, command=osdf.before + command.command, after=osdf.after,
                               container_image=_container_image(job, deployment))


def _container_image(job, deployment: set):
    """The rule's container, which HTCondor runs the job in, when Snakemake would run it in one (module doc)."""
    if job.container_img_url and DeploymentMethod.APPTAINER in deployment:
        return job.container_img_url
    return None


def _check_runs_alone(job, deployment: set) -> None:
    """What any rule's code needs Snakemake around it for, whatever the rule's kind."""
    if job.is_group():
        raise NeedsSnakemake("a group job runs several rules, one after the other, as Snakemake orders them")
    # Snakemake sets up a rule's conda or module environment only under that deployment method, and
    # ignores it without.
    if (job.conda_env_spec and DeploymentMethod.CONDA in deployment
            or job.env_modules and DeploymentMethod.ENV_MODULES in deployment):
        raise NeedsSnakemake("its conda or module environment is set up by Snakemake")
    if job.benchmark or job.is_shadow or job.is_pipe or job.is_service:
        raise NeedsSnakemake("its benchmark, shadow directory, pipe or service is Snakemake's to run")
    flags = {flag for path in [*job.output, *job.log] for flag in getattr(path, "flags", {})}
    if flags - FLAGS_WITHOUT_SNAKEMAKE:
        raise NeedsSnakemake(f"its outputs flagged {', '.join(sorted(flags - FLAGS_WITHOUT_SNAKEMAKE))} "
                             "are Snakemake's to handle in the job")


def _osdf_steps(job, workflow, options: SubmitOptions, python: str) -> osdf_transfer.InJobSteps:
    """What the job's shell does for its storage files instead of the job's Snakemake: they must all
    be OSDF objects, moved by HTCondor's URL transfers, at the same paths in the job as in the command."""
    storage = [path for path in [*job.input, *job.output, *job.log] if getattr(path, "is_storage", False)]
    if not storage:
        return osdf_transfer.InJobSteps()
    if not all(osdf_transfer.is_osdf(path) for path in storage):
        raise NeedsSnakemake("its storage-plugin files other than OSDF objects are mapped to local paths "
                             "and moved by Snakemake")
    if options.shared_fs:
        raise NeedsSnakemake("on a shared filesystem its OSDF objects are retrieved and stored by the job's Snakemake, "
                             "not by URL transfers")
    prefix = str(workflow.storage_settings.remote_job_local_storage_prefix)
    elsewhere = [str(path) for path in storage
                 if os.path.isabs(str(path)) or str(path) != str(osdf_transfer.sandbox_path(path, prefix))]
    if elsewhere:
        raise NeedsSnakemake(f"its OSDF objects {', '.join(elsewhere)} are not in the sandbox at the paths its "
                             f"command names: the job keeps them below {prefix} (--remote-job-local-storage-prefix)")
    return osdf_transfer.in_job_steps(job.input, [*job.output, *job.log], prefix, python)


def _check_no_tmpdir(code: str, what: str) -> None:
    """A command or script that names the tmpdir resource needs the job's Snakemake: formatted here,
    tmpdir would be the submit side's temporary directory, which the execute point does not have."""
    if "tmpdir" in code:
        raise NeedsSnakemake(f"its {what} uses the tmpdir resource, which must be the execute point's")


def _shell_command(job) -> JobCommand:
    chosen = dict(job.resources.items()).get("shell_exec") or shell.get_executable() or "sh"
    shell_path = SHELLS.get(os.path.basename(str(chosen)))
    if shell_path is None:
        raise NeedsSnakemake(f"its shell {chosen} may not be on an execute point (bash and sh are)")
    _check_no_tmpdir(job.rule.shellcmd, "command")
    # Snakemake's prefix as the Snakefile left it (`set -euo pipefail; ` under bash
    # unless shell.prefix() changed it), and its suffix.
    prefix = shell._get_process_prefix(shell_path)
    command = " ".join((prefix, job.shellcmd, shell._process_suffix)).strip()
    if CONTROL_CHARACTERS.search(command):
        # description.py refuses newlines in a submit argument.
        raise NeedsSnakemake("its command spans several lines, which a submit argument cannot hold")
    return JobCommand(shell_path, command, runs_snakemake=False)


def _script_command(job, workflow, options: SubmitOptions, python: str) -> JobCommand:
    """Run the rule's Python script with Snakemake's preamble, prepared here."""
    path, source, language, is_local, _ = get_source(
        job.rule.script, workflow.sourcecache, job.rule.basedir, job.wildcards, job.params)
    if language != "python":
        raise NeedsSnakemake(f"its script is {language}, which Snakemake runs with its own interpreter and preamble")
    if not is_local:
        raise NeedsSnakemake("its script comes from a URL, which Snakemake fetches")
    _check_no_tmpdir(source, "script")
    # The script as the job sees it: at its place relative to the working directory, which
    # file transfer keeps in the sandbox (its path here means nothing on an execute point).
    script = os.path.relpath(path.get_path_or_uri(secret_free=True), options.workdir)
    preamble = PythonScript.generate_preamble(
        path=LocalSourceFile(script), cache_path=None, source=source, basedir=job.rule.basedir,
        # As Snakemake's local executor passes them (executors/local.py, job_args_and_prepare).
        input_=job.input._plainstrings(), output=job.output._plainstrings(), params=job.params,
        wildcards=job.wildcards, threads=job.threads, resources=job.resources, log=job.log._plainstrings(),
        config=workflow.config, rulename=job.rule.name, conda_env=None, container_img=None,
        singularity_args=None, env_modules=None, bench_record=None, jobid=job.jobid, bench_iteration=None,
        cleanup_scripts=True, shadow_dir=None, is_local=True,
        # Snakemake's get_preamble sets __file__ to the script's real path on this side; in the job
        # the script is at its relative path.
        preamble_addendum=f"__real_file__ = __file__; __file__ = {script!r};",
    )
    scripts_dir = paths.job_scripts_dir(options.workdir)
    scripts_dir.mkdir(parents=True, exist_ok=True)
    prepared = scripts_dir / f"{job.rule.name}-{uuid.uuid4().hex[:8]}.{path.get_filename()}"
    # Created as any file Snakemake writes (0666 less the umask), not mkstemp's 0600: HTCondor's
    # shadow reads input files as the job's owner, who need not be the submitter (root's jobs run
    # as another user; a 0600 file was held 13/13 "Permission denied" on a real HTCondor 25.14.0).
    with os.fdopen(os.open(prepared, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "w") as out:
        out.write(preamble + source)  # as PythonScript.write_script
    prepared = os.path.relpath(prepared, options.workdir)
    command = shlex.join([python, prepared])
    return JobCommand(SCRIPT_SHELL, command, runs_snakemake=False,
                      files=(prepared, *_sources_below(os.path.dirname(script), options.workflow_sources)),
                      prepared_script=prepared)


def _sources_below(directory: str, sources) -> list[str]:
    """The workflow sources in a script's directory: Snakemake ships that whole directory with the
    script (dag.get_sources), and the preamble puts it on sys.path."""
    return [source for source in sources if PurePosixPath(source).is_relative_to(directory)]
