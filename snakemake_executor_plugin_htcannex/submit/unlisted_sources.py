"""Files a job's Snakemake needs that Snakemake's own list of workflow sources leaves out.

Snakemake's remote executors ship `DAG.get_sources()` (the Snakefile and its includes, scripts with
their directories, conda environment files, config files) plus every file `git ls-files` lists; in
a directory that is not a git repository that is all, and Snakemake only warns "Unable to retrieve
additional files from git". Two kinds of file then fail every job that runs Snakemake:
- a Python module or package next to the Snakefile that the Snakefile imports: the job's Snakemake
  parses the Snakefile again and stops with ModuleNotFoundError;
- a file a `run:` block opens without declaring it as an input: the block runs in the job.
Both are found here from what the submit side already knows, and travel as workflow sources:
the modules the Snakefile imported (sys.modules: every module whose file lies below a directory
holding the Snakefile or one of its includes, other than installed packages), and the files named
by string constants of `run:` blocks that exist below the working directory.
"""
import os
import site
import sys
import sysconfig
from pathlib import Path
from types import CodeType


def unlisted_sources(workflow, listed, workdir: Path) -> list[str]:
    """Paths (relative to `workdir`) the job needs besides `listed` (DAG.get_sources())."""
    workdir = workdir.resolve()
    found = [*_imported_modules(_workflow_dirs(workflow)), *_run_block_files(workflow, workdir)]
    listed = {os.path.normpath(workdir / path) for path in listed}
    return sorted({os.path.relpath(path, workdir) for path in map(str, found) if path not in listed})


def _workflow_dirs(workflow) -> set[Path]:
    """The directories holding the Snakefile and the files it includes (local ones)."""
    dirs = set()
    for included in workflow.included:
        path = included.get_path_or_uri(secret_free=True) if hasattr(included, "get_path_or_uri") else included
        if "://" not in str(path):
            dirs.add(Path(path).resolve().parent)
    return dirs


def _imported_modules(dirs: set[Path]) -> list[Path]:
    # Installed packages are the execute side's business (its Python or container image), also
    # the user's own site-packages, which lies below a home directory holding an included file.
    installed = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib", "stdlib")}
    installed.add(Path(site.getusersitepackages()).resolve())
    modules = []
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not file or not file.endswith(".py"):
            continue
        path = Path(file).resolve()
        if any(path.is_relative_to(root) for root in installed):
            continue
        if any(path.is_relative_to(directory) for directory in dirs) and path.is_file():
            modules.append(path)
    return modules


def _run_block_files(workflow, workdir: Path) -> list[Path]:
    files = []
    for rule in workflow.rules:
        if not rule.is_run or rule.run_func is None:
            continue
        for text in _string_constants(rule.run_func.__code__):
            if not text or "\n" in text or "\0" in text or len(text) > 4096:
                continue
            path = (workdir / text).resolve()
            if path.is_relative_to(workdir) and path.is_file():
                files.append(path)
    return files


def _string_constants(code: CodeType):
    for constant in code.co_consts:
        if isinstance(constant, str):
            yield constant
        elif isinstance(constant, CodeType):
            yield from _string_constants(constant)
