"""Where htcannex keeps its files: the `.htcannex/` directory of a run, and the job's marker file.

A run directory (Snakemake's working directory) holds:

    .htcannex/jobs.log                 the one HTCondor user event log of every job (tracking, board, report)
    .htcannex/logs/<job>.out|.err      each job's stdout and stderr
    .htcannex/scripts/<rule>-*.py      a script rule's script with Snakemake's preamble, for its job (direct_command.py)
    .htcannex/output-dirs/<digest>/    empty trees of jobs' output directories, sent to make them (output_directories.py)
    .htcannex/names/<digest>           links with plain names to inputs whose names a transfer list cannot hold (transfer_names.py)
    .htcannex/annex-requests.json      the annexes requested, so a restart does not request them again
    .htcannex/memory-floors.json       the memory each job asks for at least after a memory hold or kill (memory_floors.py)
    .htcannex/pool/                    the embedded pool's spool (its own default: htcannex_pool.DEFAULT_SPOOL)
    .htcannex/driver/                  the Snakemake driver `htcannex submit` started (driver/)
"""
from pathlib import Path

STATE_DIR = Path(".htcannex")

# A self-checkpointing script writes its exit code to this file in the job's working directory
# (Snakemake around it exits 1 whatever the script exited with); the job wrapper then exits with
# that code. The job learns the name from CHECKPOINT_EXIT_MARKER_VARIABLE in its environment.
CHECKPOINT_EXIT_MARKER = ".htcannex-checkpoint-exit"
CHECKPOINT_EXIT_MARKER_VARIABLE = "HTCANNEX_CHECKPOINT_EXIT_MARKER"
# Names, in the job's environment, the Python a job's own command should run (runtime.Runtime.job_python).
# Part of the job-environment contract workflows read (chunked_training's {python}).
JOB_PYTHON_VARIABLE = "HTCANNEX_PYTHON"
# HTCondor starts jobs with no PATH; the spawned Snakemake (its ILP scheduler
# included) and the rules' shell commands need one.
EXECUTE_POINT_PATH = "/usr/local/bin:/usr/bin:/bin"
# The walk-away driver's files in driver_dir: its event log, Snakemake's output (the board's
# last lines come from its stderr) and which schedd holds it (for `htcannex stop`).
DRIVER_EVENT_LOG = "events.log"
DRIVER_STDOUT = "snakemake.out"
DRIVER_STDERR = "snakemake.err"
DRIVER_RECORD = "driver.json"


def state_dir(workdir: Path | str = ".") -> Path:
    return Path(workdir) / STATE_DIR


def event_log(workdir: Path | str = ".") -> Path:
    return state_dir(workdir) / "jobs.log"


def job_logs_dir(workdir: Path | str = ".") -> Path:
    return state_dir(workdir) / "logs"


def job_scripts_dir(workdir: Path | str = ".") -> Path:
    return state_dir(workdir) / "scripts"


def output_directories_dir(workdir: Path | str = ".") -> Path:
    return state_dir(workdir) / "output-dirs"


def driver_dir(workdir: Path | str = ".") -> Path:
    return state_dir(workdir) / "driver"


def annex_ledger(workdir: Path | str = ".") -> Path:
    return state_dir(workdir) / "annex-requests.json"


def transfer_names_dir(workdir: Path | str = ".") -> Path:
    return state_dir(workdir) / "names"


def memory_floors(workdir: Path | str = ".") -> Path:
    return state_dir(workdir) / "memory-floors.json"
