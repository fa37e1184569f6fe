"""The directories a job's outputs go in, there before its command runs, without a process in the job.

A job's own Snakemake makes its outputs' directories before the rule's code runs. A job without
Snakemake (direct_command.py) ran `mkdir -p` for them instead: a process per job (1.3-1.6 ms of
CPU and ~1 ms of a chain link's latency, docs/benchmarks.md), as a sandbox starts empty.

- With file transfer to the embedded pool, HTCondor makes them: an empty tree of those directories, kept in
  `.htcannex/output-dirs/<digest>/` (one per set of directories: a rule's jobs share one), is listed
  in `transfer_input_files` by its absolute path with a trailing slash. HTCondor transfers the
  tree's contents, each directory with its Mkdir command, at its base name under the sandbox
  (`preserve_relative_paths` keeps relative paths only; src/condor_utils/file_transfer.cpp
  ExpandFileTransferList, DoUpload's TransferCommand::Mkdir, DoDownload's mkdir). So
  `results/run1/` arrives as `results/run1/`, merged with directories the inputs bring.
- On a real pool, and where a workdir's path a transfer list cannot hold (a comma; transfer_names.py),
  the job's shell makes the directories (`in_job`): on a real 25.x pool each item of the input transfer
  makes a 5-s wait before the job starts likelier (transfer_items.py); a sweep of 60 1-s jobs on one
  slot took 203 s with the trees, 89 s without. A job with no input then sends nothing.
- On a shared filesystem the job runs in the workdir, and the directories are made there before
  the submit, as Snakemake's local executor makes them in its own process (Job.prepare).
"""
import hashlib
import shlex
import shutil
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from snakemake_executor_plugin_htcannex import paths
from snakemake_executor_plugin_htcannex.submit_language import needs_stand_in


def of(outputs: Iterable[str]) -> list[str]:
    """The directories (relative, sorted) that `outputs` (relative paths) are written in."""
    return sorted({str(PurePosixPath(output).parent) for output in outputs} - {"."})


def made_by(inputs: Iterable[str]) -> set[str]:
    """The directories that transferring `inputs` (as listed in transfer_input_files) makes in the sandbox:
    with preserve_relative_paths every directory of a relative path comes as a Mkdir of its own. A job's
    output directories among them need no tree (each item more costs, transfer_items.py)."""
    return {str(parent) for path in inputs if "://" not in path and not PurePosixPath(path).is_absolute()
            for parent in PurePosixPath(path).parents} - {"."}


def listable(workdir: Path) -> bool:
    """Whether the trees of `workdir` can be listed in transfer_input_files (transferred_tree)."""
    return not needs_stand_in(str(paths.output_directories_dir(workdir)))


def sent_as_tree(few_transfer_items: bool, workdir: Path) -> bool:
    """Whether a job's output directories come as a tree (transferred_tree) rather than from `mkdir -p` in the
    job (in_job): where transfer items cost nothing (not SubmitOptions.few_transfer_items) and trees can be listed."""
    return not few_transfer_items and listable(workdir)


def in_job(directories: list[str]) -> str:
    """Shell that makes `directories` in the job's sandbox, where their tree is not sent; "" for none."""
    if not directories:
        return ""
    return "mkdir -p -- " + " ".join(map(shlex.quote, directories))


def transferred_tree(workdir: Path, directories: list[str]) -> str:
    """The transfer_input_files entry that makes `directories` (relative to the sandbox) in a job's
    sandbox: the absolute path of their empty tree, with a trailing slash. Made if it is missing."""
    digest = hashlib.sha256("\0".join(directories).encode()).hexdigest()[:16]
    tree = paths.output_directories_dir(workdir) / digest
    if not tree.is_dir():
        # Built aside and renamed: a run stopped half-way never leaves a tree that lacks a directory.
        building = tree.with_name(f"{digest}.partial")
        shutil.rmtree(building, ignore_errors=True)
        for directory in directories:
            (building / directory).mkdir(parents=True, exist_ok=True)
        building.rename(tree)
    return f"{tree}/"


def make_in_place(workdir: Path, directories: list[str]) -> None:
    """Make `directories` (relative to `workdir`) where the job will write, on a shared filesystem."""
    for directory in directories:
        (workdir / directory).mkdir(parents=True, exist_ok=True)
