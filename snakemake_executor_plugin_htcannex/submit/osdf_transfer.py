"""OSDF storage files of a job become HTCondor URL transfers.

The access point only looks at OSDF objects (existence, size, checksum sidecar); the
bytes move between the origin (or a cache) and the execute point, by HTCondor:

- an input ``osdf:///p/ckpt-4.pt`` goes in ``transfer_input_files`` together with its
  sidecar ``osdf:///p/ckpt-4.pt.sha256``; HTCondor drops both in the scratch directory
  under their base names;
- an output is written by the job's inner Snakemake at its storage-local path
  (``.snakemake/storage/osdf/p/ckpt-5.pt``), listed in ``transfer_output_files`` with
  its sidecar, and remapped to its URL with ``transfer_output_remaps``;
- the job's environment sets ``SNAKEMAKE_STORAGE_OSDF_BACKEND=htcondor``, so the inner
  Snakemake's osdf provider moves dropped inputs to where it expects them (verifying
  their checksums) and leaves outputs for HTCondor, instead of contacting the origin.

A job that runs its rule without Snakemake (direct_command.py) does the provider's part in
its shell instead (``in_job_steps``): its command's paths are those storage-local paths, so
the same transfers serve it.

See docs/osdf.md for the whole flow.
"""

from __future__ import annotations

from collections.abc import Iterable
import shlex
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from snakemake_interface_common.exceptions import WorkflowError

from snakemake_storage_plugin_osdf import StorageProvider as OsdfProvider
from snakemake_storage_plugin_osdf import query
from snakemake_storage_plugin_osdf.integrity import SIDECAR_SUFFIX

BACKEND_VARIABLE = "SNAKEMAKE_STORAGE_OSDF_BACKEND"
# Where HTCondor drops URL inputs, as the job's shell names it: the scratch directory (HTCondor sets
# the variable in every job; the htcondor backend falls back to the working directory alike).
SCRATCH_DIR = '"${_CONDOR_SCRATCH_DIR:-.}"'
# What the job's shell runs where its own quick steps do not pass (the provider's verdict and message).
IN_JOB_MODULE = "snakemake_storage_plugin_osdf.in_job"


@dataclass(frozen=True)
class OsdfTransfers:
    """What a job's submit needs for its files, OSDF objects split from the rest."""

    local_inputs: tuple[str, ...] = ()  # transfer_input_files as before (paths)
    local_outputs: tuple[str, ...] = ()  # transfer_output_files as before (paths)
    input_urls: tuple[str, ...] = ()  # add to transfer_input_files
    output_files: tuple[str, ...] = ()  # add to transfer_output_files (sandbox paths)
    output_remaps: dict[str, str] = field(default_factory=dict)  # transfer_output_remaps
    environment: dict[str, str] = field(default_factory=dict)  # add to environment

    @property
    def inputs(self) -> tuple[str, ...]:
        """Everything for ``transfer_input_files`` (``JobSpec.inputs``)."""
        return self.local_inputs + self.input_urls

    @property
    def outputs(self) -> tuple[str, ...]:
        """Everything for ``transfer_output_files`` (``JobSpec.outputs``); the OSDF ones
        are remapped by ``output_remaps`` (``JobSpec.output_remaps``)."""
        return self.local_outputs + self.output_files


def plan(
    inputs: Iterable,
    outputs: Iterable,
    sandbox_storage_prefix: str = ".snakemake/storage",
) -> OsdfTransfers:
    """Split a job's files (Snakemake ``_IOFile``s) into local files and OSDF objects.

    ``sandbox_storage_prefix`` is where the job's inner Snakemake keeps storage files,
    relative to the sandbox: ``workflow.storage_settings.remote_job_local_storage_prefix``.
    """
    local_inputs, input_urls, landed = [], [], {}
    for file in inputs:
        if not is_osdf(file):
            local_inputs.append(str(file))
            continue
        url = file.storage_object.query
        name = query.basename(url)
        if landed.setdefault(name, url) != url:
            raise WorkflowError(
                f"{landed[name]} and {url} are inputs of one job with the same base "
                f"name {name!r}; HTCondor drops URL inputs into the sandbox by base "
                "name, so one would overwrite the other. Give the objects distinct names."
            )
        input_urls += [url, url + SIDECAR_SUFFIX]

    local_outputs, output_files, remaps = [], [], {}
    for file in outputs:
        if not is_osdf(file):
            local_outputs.append(str(file))
            continue
        url = file.storage_object.query
        local = str(sandbox_path(file, sandbox_storage_prefix))
        for name, destination in ((local, url), (local + SIDECAR_SUFFIX, url + SIDECAR_SUFFIX)):
            output_files.append(name)
            remaps[name] = destination

    return OsdfTransfers(
        local_inputs=tuple(local_inputs),
        local_outputs=tuple(local_outputs),
        input_urls=tuple(input_urls),
        output_files=tuple(output_files),
        output_remaps=remaps,
        # Every job gets it, OSDF files or not: the Snakefile registers the provider
        # in each job, and with the access point's backend it would look for the
        # access point's origin (local) or a token (pelican) on the execute point.
        environment={BACKEND_VARIABLE: "htcondor"},
    )


def is_osdf(file) -> bool:
    """Whether a Snakemake file is an object of the osdf storage provider."""
    return getattr(file, "is_storage", False) and isinstance(
        file.storage_object.provider, OsdfProvider
    )


def sandbox_path(file, sandbox_storage_prefix: str) -> PurePosixPath:
    """Where the inner Snakemake's osdf provider keeps this object: its local prefix
    is ``<prefix>/<provider name or tag>``, the suffix the object path."""
    storage_object = file.storage_object
    return _provider_prefix(file, sandbox_storage_prefix) / storage_object.local_suffix()


def _provider_prefix(file, sandbox_storage_prefix: str) -> PurePosixPath:
    return PurePosixPath(sandbox_storage_prefix) / file.storage_object.provider.local_prefix.name


@dataclass(frozen=True)
class InJobSteps:
    """Shell for a job without Snakemake: what its Snakemake's osdf provider (backend
    ``htcondor``) would do around the command."""

    before: str = ""  # ends in "; ": each landed input at its path, checked; else the job exits 1
    after: str = ""  # to run (&&) once the command succeeded: each output's sidecar next to it


def in_job_steps(inputs: Iterable, outputs: Iterable, sandbox_storage_prefix: str, python: str) -> InJobSteps:
    """The shell steps for the OSDF files among a job's ``inputs`` and ``outputs``, whose paths in
    the command must be their ``sandbox_path``s (the caller checks); ``python`` is the job's.

    An input: moved with its sidecar from where HTCondor dropped them to its path, unless a restart
    in the same sandbox (a self-checkpointing job) finds it there already, as the backend's ``get``;
    then its sha256 (``sha256sum``) compared with the sidecar's. An output: its sidecar written by
    ``sha256sum``, whose format the sidecar's is. Where a step does not pass, the provider itself
    (``IN_JOB_MODULE``) retrieves or stores the object: it accepts what its checks accept, and
    its error fails the job, before the command for an input.
    """
    before = []
    for url, local, prefix in _objects(inputs, sandbox_storage_prefix):
        # The path's base name is the object's, the one it landed under: one mv moves both files.
        landed = f"{SCRATCH_DIR}/{shlex.quote(query.basename(url))}"
        path, directory = shlex.quote(local), shlex.quote(str(PurePosixPath(local).parent))
        quick = (
            f"{{ [ -f {path} ] || {{ {{ [ -d {directory} ] || mkdir -p {directory}; }} && "
            f"mv {landed} {landed}{SIDECAR_SUFFIX} {directory}/; }}; }} && "
            f"read -r htcannex_sha256 htcannex_name < {shlex.quote(local + SIDECAR_SUFFIX)} && "
            f'[ "$(sha256sum < {path})" = "$htcannex_sha256  -" ]'
        )
        before.append(f"{{ {quick} || {_provider(python, 'retrieve', prefix, url)} || exit 1; }}; ")
    after = []
    for url, local, prefix in _objects(outputs, sandbox_storage_prefix):
        name = PurePosixPath(local).name
        quick = (f"(cd {shlex.quote(str(PurePosixPath(local).parent))} && "
                 f"sha256sum {shlex.quote(name)} > {shlex.quote(name + SIDECAR_SUFFIX)})")
        after.append(f"{{ {quick} || {_provider(python, 'store', prefix, url)}; }}")
    return InJobSteps(before="".join(before), after=" && ".join(after))


def _objects(files: Iterable, sandbox_storage_prefix: str) -> list[tuple[str, str, str]]:
    """(URL, path in the job, the provider's prefix there) of each OSDF object among ``files``, once."""
    objects = {}
    for file in files:
        if is_osdf(file):
            url = file.storage_object.query
            objects[url] = (url, str(sandbox_path(file, sandbox_storage_prefix)),
                            str(_provider_prefix(file, sandbox_storage_prefix)))
    return list(objects.values())


def _provider(python: str, action: str, prefix: str, url: str) -> str:
    return shlex.join([python, "-m", IN_JOB_MODULE, action, prefix, url])
