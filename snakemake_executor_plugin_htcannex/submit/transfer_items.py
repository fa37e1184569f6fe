"""How many items a job's input transfer has, where each one costs: a real HTCondor 25.x pool.

The shadow sends a job's input in a child process, which writes one status message per item (each
file, and with `preserve_relative_paths` each directory of a relative path as a Mkdir item of its
own) and a final one, to a pipe that the shadow reads one message per pass of its event loop
(src/condor_utils/file_transfer.cpp DoUpload, UpdateXferStatus; ReadTransferPipeMsg). Once the
starter has the files it asks the shadow whether to start the job; a shadow that has not yet read
the final message answers "ask again in 5 s" (src/condor_shadow.V6.1/pseudo_ops.cpp
pseudo_request_guidance, RetryRequest). That happens when the whole transfer ends before the shadow
is back in its loop after starting it: small files between a shadow and a starter on the same
machine. Measured on a one-machine HTCondor 25.13.2 pool, chains of 1-s jobs: an input
`steps/0/3.txt` (three items) waited the 5 s at 12 of 21 links, three input files at the top of
the sandbox at 6 of 7, one file alone at none of 21 (docs/benchmarks.md). A transfer that takes
longer than that (a large file, another machine's round trip) leaves the shadow time to read them.

So, on a real pool:
- a job without Snakemake gets no tree for its output directories (output_directories.py);
- a job whose whole input transfer is one file in a directory sends it as one item: listed by its
  absolute path, HTCondor puts it at the top of the sandbox under its base name
  (`preserve_relative_paths` keeps relative paths only), and the job's shell moves it to its path
  before the command, its directory made in the same `mkdir -p` as the output directories. With
  two or more files the race stays whatever their directories, so they keep their paths.
"""
import os
from collections.abc import Sequence
from pathlib import PurePosixPath

from snakemake_executor_plugin_htcannex.submit.transfer_names import move_into_place
from snakemake_executor_plugin_htcannex.submit_language import needs_stand_in

# Names HTCondor itself writes at the top of a sandbox (.job.ad, .machine.ad, .chirp.config, _condor_stdout,
# ...): an input never takes one of their places.
HTCONDOR_SANDBOX_PREFIXES = (".", "_condor_")


def sent_flat(entries: Sequence[str], outputs: Sequence[str], initial_dir) -> str | None:
    """The one input that travels at the top of the sandbox under its base name, or None.

    `entries`: what the job's transfer_input_files lists, relative to the job's initial directory (the top
    of the sandbox), URLs included (a plug-in fetches those after the files, which gives the shadow its
    time); `outputs`: the job's outputs there. Only a plain file in a directory, alone among the listed
    files, whose base name neither HTCondor's own files nor a directory the job's shell makes (its
    output directories, its own) can take."""
    files = [entry for entry in entries if "://" not in entry]
    if len(files) != 1:
        return None
    [path] = files
    pure = PurePosixPath(path)
    made_here = {PurePosixPath(name).parts[0] for name in [*outputs, str(pure.parent)] if PurePosixPath(name).parts}
    if (pure.is_absolute() or str(pure.parent) == "." or needs_stand_in(listed(path, initial_dir))
            or pure.name in made_here or pure.name.startswith(HTCONDOR_SANDBOX_PREFIXES)
            or os.path.isdir(os.path.join(initial_dir, path))):
        return None
    return path


def listed(path: str, initial_dir) -> str:
    """`path` (relative to the initial directory), as transfer_input_files lists it to arrive at the top of the
    sandbox under its base name."""
    return os.path.join(initial_dir, path)


def into_place(path: str) -> str:
    """Shell, run at the top of the sandbox, that moves the flat input to `path`."""
    return move_into_place(PurePosixPath(path).name, path)
