"""The provider's work in an HTCondor job that runs its rule without Snakemake.

htcannex runs a rule whose only storage files are OSDF objects without Snakemake in its job
(snakemake_executor_plugin_htcannex/direct_command.py); the job's shell then does what this
provider, with backend ``htcondor``, does for a job's Snakemake (``osdf_transfer.in_job_steps``
writes those steps). The shell does the usual case itself, in milliseconds: ``mv`` of each landed
input to its path, its sha256 compared with its sidecar, ``sha256sum`` writing each output's
sidecar. Where that does not pass it runs this module, whose import costs ~0.2 s of CPU (the
provider imports Snakemake's storage interface), so that what is accepted, and the message when
something is not, are the provider's own (``StorageObject.retrieve_object`` and ``store_object``,
as in a job's Snakemake)::

    python -m snakemake_storage_plugin_osdf.in_job retrieve PREFIX URL...
    python -m snakemake_storage_plugin_osdf.in_job store PREFIX URL...

PREFIX is the provider's local prefix in the job (``<storage prefix>/osdf``, relative to where
the job runs); the objects are looked for, and left, below it. A failure prints the error (a
corrupt input: CorruptObjectError, naming the object and both checksums) and exits 1, which fails
the job before its command runs on a bad input.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from snakemake_interface_common.exceptions import WorkflowError

from snakemake_storage_plugin_osdf import StorageProvider, StorageProviderSettings

ACTIONS = ("retrieve", "store")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in ACTIONS:
        print(f"usage: python -m {__spec__.name} {{{','.join(ACTIONS)}}} PREFIX URL...", file=sys.stderr)
        return 2
    action, prefix, *urls = argv
    provider = StorageProvider(
        local_prefix=Path(prefix),
        logger=logging.getLogger(__name__),
        settings=StorageProviderSettings(backend="htcondor"),
    )
    for url in urls:
        storage_object = provider.object(url)
        try:
            if action == "retrieve":
                storage_object.retrieve_object()
            else:
                storage_object.store_object()
        except (WorkflowError, OSError) as error:
            print(f"{url}: {error}" if isinstance(error, OSError) else error, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
