"""The processes of a job between its script and the job's own command (a test helper next to
the scripts: it travels with them)."""
import json
import os

import psutil


def job_processes() -> list[list[str]]:
    """argv of this process's ancestors in the job's sandbox (the pool's daemon runs outside it)."""
    scratch = os.path.realpath(os.environ["_CONDOR_SCRATCH_DIR"])
    argvs = []
    for process in psutil.Process().parents():
        if not os.path.realpath(process.cwd()).startswith(scratch):
            break
        argvs.append(process.cmdline())
    return argvs


def write(path: str, **extra) -> None:
    with open(path, "w") as out:
        json.dump({"ancestors": job_processes(), **extra}, out)
