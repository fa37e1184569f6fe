r"""Files whose names HTCondor's transfer lists cannot hold travel under stand-in names, and arrive
under their own.

`transfer_input_files` and `transfer_output_files` are comma-separated lists whose items HTCondor
trims of white space (StringTokenIterator in submit_utils.cpp and file_transfer.cpp): a name with
a comma, or one that starts or ends with white space, cannot be listed. ML sweeps name directories
after their hyperparameters (Hydra's `lr=0.1,wd=0.01/`). Such names travel by HTCondor's own means:

- An output comes back through `transfer_output_remaps`. Once the job's command has succeeded, the
  job's shell moves the output into a directory at the top of the sandbox named after the output's
  directory (`.htcannex-out-<digest>`), which is listed and remapped to that directory. HTCondor
  remaps a name it finds no rule for by its parent directory (filename_remap_find), and makes a
  listed directory on the receiving side under its remapped name (DoDownload's Mkdir), so
  `lr=0.1,wd=0.01/model.pt` comes back where the local executor leaves it, under its own name.
- An input file goes in through a symbolic link with a plain name, `.htcannex/names/<digest>` in
  the submit directory: HTCondor sends the file a link points to (ExpandFileTransferList), and the
  job's shell moves it to its own name before the command runs. A directory cannot go in so
  (HTCondor refuses a link to a directory, DoUpload): it is refused, with the reason.

A remap is `name = destination; ...`, and HTCondor's parser (filename_tools_cpp.cpp, copy_upto)
trims white space around each side and reads `\=` in a name and `\;` in a destination as the
character; a name cannot hold `;` at all. `remap_entry` writes one entry so that it reads back as
given.
"""
import hashlib
import os
import shlex
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from snakemake_executor_plugin_htcannex import paths
from snakemake_executor_plugin_htcannex.submit_language import needs_stand_in

# Where an output with such a name waits in the sandbox to be sent back: one directory per output directory.
OUTPUT_STAND_IN_PREFIX = ".htcannex-out-"


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def in_sandbox(name: str, workdir, initial_dir) -> str | None:
    """Where file `name` (relative to the workdir, or absolute) is in the sandbox, relative to its top (the
    job's initial directory); None for a URL or a file outside it (description.py refuses those)."""
    if "://" in str(name):
        return None
    path = os.path.relpath(os.path.normpath(os.path.join(workdir, name)), initial_dir)
    return None if path.startswith("..") else path


def input_stand_in(name: str, workdir, initial_dir) -> str:
    """The plain name, relative to the job's initial directory, that input `name` (relative to it too)
    travels under: a symbolic link in the workdir's .htcannex/names/ on the submit side, the same
    path in the sandbox."""
    link = paths.transfer_names_dir(workdir) / _digest(name)
    return os.path.relpath(link, initial_dir)


def make_input_link(name: str, workdir, initial_dir) -> str:
    """input_stand_in(name), made on the submit side if it is missing; returns it."""
    stand_in = input_stand_in(name, workdir, initial_dir)
    link = os.path.join(initial_dir, stand_in)
    target = os.path.join(initial_dir, name)
    if not (os.path.islink(link) and os.readlink(link) == target):
        # Made aside and renamed over: a link is never half there, and jobs of a parallel run may share it.
        os.makedirs(os.path.dirname(link), exist_ok=True)
        partial = f"{link}.partial"
        if os.path.lexists(partial):
            os.remove(partial)
        os.symlink(target, partial)
        os.replace(partial, link)
    return stand_in


def output_stand_in(name: str) -> str:
    """The directory at the top of the sandbox that output `name` (relative to the sandbox) waits in to
    be sent back, named after the output's directory."""
    return OUTPUT_STAND_IN_PREFIX + _digest(str(PurePosixPath(name).parent))


def remap_entry(name: str, destination: str) -> str:
    """One `transfer_output_remaps` entry that HTCondor reads back as (`name`, `destination`).
    Raises ValueError for a name HTCondor's parser cannot read (one with ';')."""
    if ";" in name:
        raise ValueError("HTCondor's transfer_output_remaps cannot remap a name that contains ';'")
    if destination != destination.strip() or destination.endswith("\\"):
        # Trimmed, or an escape of the next entry's ';': the same path, written so that neither happens.
        destination = str(PurePosixPath(destination)) + "/."
        if destination[0].isspace():
            destination = "./" + destination
    return f"{name.replace('=', chr(92) + '=')} = {destination.replace(';', chr(92) + ';')}"


def output_remaps(outputs: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """(the transfer_output_files items for `outputs`, relative to the sandbox, the remaps they need):
    each output that needs a stand-in is replaced by its directory's stand-in, remapped to that
    directory."""
    listed, remaps = [], {}
    for name in outputs:
        if needs_stand_in(name):
            stand_in = output_stand_in(name)
            remaps[stand_in] = str(PurePosixPath(name).parent)
            name = stand_in
        listed.append(name)
    return list(dict.fromkeys(listed)), remaps


def move_into_place(arrived: str, path: str) -> str:
    """Shell, run at the top of the sandbox, that moves input `arrived` to `path` where it is there, else
    succeeds: a self-checkpointing job restarts in the same sandbox (HTCondor runs its command again
    there), its inputs already moved."""
    source = shlex.quote(arrived)
    return f"{{ [ ! -e {source} ] || mv -f -- {source} {shlex.quote(path)}; }}"


def in_job_steps(inputs: Sequence[str], outputs: Sequence[str], workdir, initial_dir) -> tuple[str, str]:
    """(shell run at the top of the sandbox before the command, and after it succeeded): moving inputs
    from their stand-ins to their names, and outputs into theirs (names relative to the sandbox, as
    listed). Empty strings when no name needs a stand-in."""
    before = []
    for name in inputs:
        if needs_stand_in(name):
            parent = str(PurePosixPath(name).parent)
            if parent != ".":
                before.append(f"mkdir -p -- {shlex.quote(parent)}")
            before.append(move_into_place(input_stand_in(name, workdir, initial_dir), name))
    after = []
    for name in outputs:
        if needs_stand_in(name):
            stand_in = output_stand_in(name)
            after += [f"mkdir -p -- {stand_in}", f"mv -f -- {shlex.quote(name)} {stand_in}/"]
    return " && ".join(before), " && ".join(after)
