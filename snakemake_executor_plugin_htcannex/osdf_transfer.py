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

See docs/osdf.md for the whole flow.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from snakemake_interface_common.exceptions import WorkflowError

from snakemake_storage_plugin_osdf import StorageProvider as OsdfProvider
from snakemake_storage_plugin_osdf import query
from snakemake_storage_plugin_osdf.integrity import SIDECAR_SUFFIX

BACKEND_VARIABLE = "SNAKEMAKE_STORAGE_OSDF_BACKEND"


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
        if not _is_osdf(file):
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
        if not _is_osdf(file):
            local_outputs.append(str(file))
            continue
        url = file.storage_object.query
        local = str(_sandbox_path(file, sandbox_storage_prefix))
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


def _is_osdf(file) -> bool:
    return getattr(file, "is_storage", False) and isinstance(
        file.storage_object.provider, OsdfProvider
    )


def _sandbox_path(file, sandbox_storage_prefix: str) -> PurePosixPath:
    """Where the inner Snakemake's osdf provider keeps this object: its local prefix
    is ``<prefix>/<provider name or tag>``, the suffix the object path."""
    storage_object = file.storage_object
    provider_name = storage_object.provider.local_prefix.name
    return PurePosixPath(sandbox_storage_prefix) / provider_name / storage_object.local_suffix()
