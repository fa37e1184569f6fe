"""Run one Snakefile with `--executor local` and with htcannex on the embedded pool, each in its own
copy of the workflow directory, and compare what they leave behind: the file tree, each file's
content and its mode (Snakemake's and htcannex's own bookkeeping directories aside)."""
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parent.parent
BIN = Path(sys.executable).parent
BOOKKEEPING = {".snakemake", ".htcannex"}


def copy_workflow(name: str, where: Path) -> Path:
    """tests/snakefiles/workflows/<name> copied to `where` (not a git repository)."""
    shutil.copytree(HERE / "workflows" / name, where)
    return where


def snakemake(workdir: Path, *args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["snakemake", "--retries", "0", *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=timeout)


def run_local(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return snakemake(workdir, "--executor", "local", "--cores", "2", *args)


def run_htcannex(workdir: Path, pool, *args: str) -> subprocess.CompletedProcess:
    return snakemake(workdir, "--executor", "htcannex", "--profile", str(REPO / "profiles" / "local"),
                     "--htcannex-pool-dir", str(pool.spool_dir), *args)


def tree(workdir: Path) -> dict:
    """relative path -> (content, permission bits) of every file left in `workdir`; None for a directory."""
    found = {}
    for path in sorted(workdir.rglob("*")):
        relative = path.relative_to(workdir)
        if relative.parts[0] in BOOKKEEPING:
            continue
        mode = stat.S_IMODE(path.lstat().st_mode)
        found[str(relative)] = (None if path.is_dir() else path.read_bytes(), oct(mode))
    return found


def assert_same_as_local(name: str, tmp_path: Path, pool, *args: str) -> tuple:
    """Both runs of workflow `name` succeed and leave the same files, contents and modes."""
    local = copy_workflow(name, tmp_path / "local")
    remote = copy_workflow(name, tmp_path / "htcannex")
    by_local = run_local(local, *args)
    assert by_local.returncode == 0, by_local.stderr[-3000:]
    by_htcannex = run_htcannex(remote, pool, *args)
    assert by_htcannex.returncode == 0, by_htcannex.stderr[-5000:]
    assert tree(remote) == tree(local)
    return by_local, by_htcannex
