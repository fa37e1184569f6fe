"""Plain shell rules run their command in the job, without a Snakemake process there.

Every Snakemake remote executor runs a whole Snakemake in each job to execute one
rule: about a second of CPU to import Snakemake and its plugins and rebuild the
DAG (docs/benchmarks.md), longer than many shell commands run. For a plain `shell:`
rule that process adds nothing the job needs: the command is already formatted on
the submit side (`job.shellcmd`, with Snakemake's own formatting of input, output,
params, wildcards, threads and resources), and what the job's Snakemake would do
around it is making the output directories and running it with Snakemake's shell
prefix (`set -euo pipefail;` under bash). Outputs come back by HTCondor file
transfer, which holds a job whose listed output is missing (tracking reports that
as a failed command), and the submit side checks them as for any job.

Everything else still gets Snakemake in the job: script, run, notebook and wrapper
rules; conda, container and module environments; benchmarks, shadow directories,
pipes and services; outputs with a flag outside FLAGS_WITHOUT_SNAKEMAKE (below);
storage-plugin files (the job's Snakemake maps them); a command using the
`tmpdir` resource, which must be the execute point's, not the submit side's; and
a shell Snakemake was told to use other than bash or sh; and a multi-line command.
"""
import os
import shlex
from pathlib import PurePosixPath
from typing import Optional

from snakemake.shell import shell

from .submit_values import CONTROL_CHARACTERS

# The only output flags a job without Snakemake may have: the main Snakemake carries them out itself
# (temp: dag.handle_temp after the job; report: `snakemake --report`) or they only say where a file
# lives (local: no default storage provider; storage files already keep Snakemake in the job).
# Every other flag (protected, ensure, directory, touch, update, pipe, service, nodelocal, and any a
# later Snakemake adds) is applied by the Snakemake process that ran the job: without a shared
# filesystem, Job.postprocess runs in the job (remote_exec) and the main process only waits for the
# files. So such a job keeps its Snakemake rather than htcannex copying Job.postprocess (its order:
# touch, log, output check with ensure's non-empty and checksum tests, unshadow, storage, protected,
# and update's restore on failure) and keeping that copy in step with each Snakemake release.
FLAGS_WITHOUT_SNAKEMAKE = frozenset({"temp", "report", "local"})
# Where the shells Snakemake may run are on any execute point.
SHELLS = {"bash": "/bin/bash", "sh": "/bin/sh"}


def direct_command(job) -> Optional[tuple[str, str]]:
    """(shell, command) that run the job without Snakemake, or None when it needs Snakemake."""
    shell_path = _shell_path(job)
    if shell_path is None or not _runs_without_snakemake(job):
        return None
    # Snakemake's prefix as the Snakefile left it (`set -euo pipefail; ` under bash
    # unless shell.prefix() changed it), and its suffix.
    prefix = shell._get_process_prefix(shell_path)
    directories = sorted({str(PurePosixPath(str(path)).parent) for path in [*job.output, *job.log]} - {"."})
    make_directories = f"mkdir -p {shlex.join(directories)}; " if directories else ""
    command = " ".join((prefix, make_directories + job.shellcmd, shell._process_suffix)).strip()
    if CONTROL_CHARACTERS.search(command):
        # A multi-line command cannot be a submit argument (description.py refuses
        # newlines): the job's Snakemake runs it from the Snakefile instead.
        return None
    return shell_path, command


def _shell_path(job) -> Optional[str]:
    chosen = dict(job.resources.items()).get("shell_exec") or shell.get_executable() or "sh"
    return SHELLS.get(os.path.basename(str(chosen)))


def _runs_without_snakemake(job) -> bool:
    if job.is_group() or not job.is_shell:
        return False
    if job.conda_env_spec or job.container_img_url or job.env_modules:
        return False
    if job.benchmark or job.is_shadow or job.is_pipe or job.is_service:
        return False
    if "tmpdir" in job.rule.shellcmd:
        return False
    files = [*job.input, *job.output, *job.log]
    if any(getattr(path, "is_storage", False) for path in files):
        return False
    return all(set(getattr(path, "flags", {})) <= FLAGS_WITHOUT_SNAKEMAKE for path in [*job.output, *job.log])
