"""`htcannex submit [SNAKEMAKE ARGS]`: run Snakemake as an HTCondor job and walk away (see driver/control.py)."""
import os
import subprocess
import sys
from pathlib import Path

import htcondor2
from htcondor_codes import JobStatus

from htcannex_pool import DEFAULT_SPOOL

from snakemake_executor_plugin_htcannex import job_owner, paths

from snakemake_executor_plugin_htcannex.driver import entry as driver_job
from snakemake_executor_plugin_htcannex.sites.catalogue import HtcannexConfigError, load_catalogue
from snakemake_executor_plugin_htcannex.driver.control import (DEFAULT_MAX_STARTS, DEFAULT_MEMORY, NOTIFICATIONS, DriverError, drivers_in_queue,
                      record_path, submit_description, write_record)
from snakemake_executor_plugin_htcannex.job_owner import JobOwner
from snakemake_executor_plugin_htcannex.schedd import DEFAULT, EMBEDDED, ScheddNotFound, connect, job_id
from snakemake_executor_plugin_htcannex.secrets import withheld_warning
from snakemake_executor_plugin_htcannex.commands._common import UsageError

SNAKEMAKE_LOCKS = Path(".snakemake") / "locks"
# What the driver's Python must import: driver_job, which runs Snakemake with the htcannex executor.
PYTHON_PROBE = f"import snakemake, {driver_job.__name__} as job; print(job.__file__)"


def snakemake_settings(snakemake_args: list[str]):
    """Snakemake's own reading of the arguments (profiles applied), so that a mistake is
    refused here, by Snakemake's parser, and not in a job an hour later."""
    from snakemake.cli import parse_args

    try:
        _, settings = parse_args(snakemake_args)
    except SystemExit as exit_:  # argparse has printed Snakemake's message
        raise UsageError(f"Snakemake refuses these arguments (above): {' '.join(snakemake_args)}") from exit_
    if settings.executor != "htcannex":
        raise UsageError("the driver runs Snakemake with the htcannex executor: add `--executor htcannex` "
                         "or a profile that sets it (e.g. --profile profiles/local)")
    if settings.dryrun or settings.unlock or settings.touch or settings.cleanup_metadata or settings.list_target_rules:
        raise UsageError("a dry run, --unlock, --touch and other one-off commands take seconds: run them with "
                         "snakemake directly, not as a driver job")
    if settings.forceall or settings.forcerun or settings.force:
        raise UsageError("a driver that restarts runs Snakemake again with the same arguments: --forceall, "
                         "--forcerun and --force would redo, after every restart, the jobs it finished before. "
                         "Delete the outputs you want redone (Snakemake reruns them and what depends on them), "
                         "then submit")
    return settings


def setting(settings, name: str):
    """An htcannex setting as Snakemake parsed it; None when unset (Snakemake leaves dataclasses.MISSING)."""
    value = getattr(settings, name, None)
    return value if isinstance(value, str) else None


def catalogue_of(settings):
    """The run's htcannex.yaml, or None when Snakemake's settings name none."""
    path = setting(settings, "htcannex_config")
    try:
        return load_catalogue(Path(path)) if path else None
    except HtcannexConfigError as error:
        raise UsageError(str(error)) from error


def driver_target(args, settings, catalogue) -> str:
    """Where the driver runs: the embedded pool when the run uses it, else this access point's schedd
    (a driver runs where its working directory is, even when Snakemake submits to a named schedd)."""
    target = args.schedd or setting(settings, "htcannex_schedd") or (catalogue.pool if catalogue else None)
    return EMBEDDED if target == EMBEDDED else DEFAULT


def annex_mode_warning(settings, catalogue) -> str | None:
    mode = setting(settings, "htcannex_annex_mode") or (catalogue.annex.mode if catalogue else None)
    if mode != "ask":
        return None
    return ("annex mode is ask, and the driver has no terminal to ask on: annexes that are not up are not "
            "requested (as mode off). Use --htcannex-annex-mode auto (within the profile's guards) or create "
            "them by hand (htcannex annex create)")


def check_writable(workdir: Path, owner: JobOwner) -> None:
    """The driver runs as the job's owner in `workdir` and writes Snakemake's lock and metadata and
    its own logs there; HTCondor writes the driver's event log and output there as that user too."""
    for path in (workdir, workdir / ".snakemake", paths.state_dir(workdir), paths.driver_dir(workdir)):
        if path.exists() and not owner.can_write(path):
            raise UsageError(f"{path} is not writable by {owner.name}, the driver job's owner: the driver "
                             "writes Snakemake's lock and metadata and its logs there, as that user. Make it "
                             f"writable for {owner.name} (chmod, chown) or run in a directory {owner.name} can "
                             "write (cd there, or -d DIR)")


def pythons_on_path(path: str) -> list[str]:
    """Every `python3` and `python` on `path`, in its order."""
    found = (Path(directory) / name for directory in path.split(os.pathsep) if directory
             for name in ("python3", "python"))
    return [str(python) for python in found if python.is_file() and os.access(python, os.X_OK)]


def probe_python(owner: JobOwner, python: str, workdir: Path) -> tuple[str | None, str]:
    """(the htcannex `python` imports when `owner` runs it here, None if it fails; why it fails)."""
    try:
        result = owner.run([python, "-c", PYTHON_PROBE], cwd=workdir, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, str(error)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        return None, lines[-1] if lines else f"exit status {result.returncode}"
    return result.stdout.strip(), ""


def driver_python(owner: JobOwner, requested: str | None, workdir: Path) -> str:
    """The Python the driver runs: it must start, as the job's owner, with Snakemake and htcannex.

    `requested` if given; else this one when you are the owner; else (as root, for another owner)
    the first of this one and the `python3`/`python` on PATH (the driver's PATH is yours) that does.
    """
    if requested is None and owner.is_me:
        return sys.executable
    candidates = [requested] if requested else [sys.executable, *pythons_on_path(os.environ["PATH"])]
    refused = []
    for python in dict.fromkeys(candidates):
        imported, why = probe_python(owner, python, workdir)
        if imported is None:
            refused.append(f"  {python}: {why}")
            continue
        if refused and not requested:
            print(f"htcannex submit: the driver runs as {owner.name}, for whom this Python does not start "
                  f"with snakemake and htcannex ({refused[0].strip()}): it runs {python} (--python to choose)",
                  file=sys.stderr)
        if Path(imported).resolve() != Path(driver_job.__file__).resolve():
            print(f"htcannex submit: {python} runs the htcannex in {Path(imported).parent}, not this one "
                  f"({Path(driver_job.__file__).parent})", file=sys.stderr)
        return python
    raise UsageError(f"the driver job runs as {owner.name} (its Owner on this schedd), who can run no Python "
                     "with snakemake and htcannex here:\n" + "\n".join(refused) + "\nFix: --python PATH to a "
                     f"Python with both that {owner.name} can run (a virtual environment in a directory "
                     f"{owner.name} can read), or submit as {owner.name}")


def make_driver_dir(workdir: Path, owner: JobOwner) -> None:
    """The driver's directory, which HTCondor and the driver write as the job's owner."""
    for directory in (paths.state_dir(workdir), paths.driver_dir(workdir)):
        if not directory.is_dir():
            directory.mkdir()
            owner.give(directory)


def check_not_running(schedd, workdir: Path) -> None:
    queued = drivers_in_queue(schedd, workdir)
    if queued:
        job = job_id(queued[0])
        ending = " (removed, still ending)" if queued[0]["JobStatus"] == JobStatus.REMOVED else ""
        raise UsageError(f"a driver (HTCondor job {job}{ending}) already runs Snakemake in {workdir}: "
                         "`htcannex status` shows it, `htcannex stop` ends it")
    locks = workdir / SNAKEMAKE_LOCKS
    if locks.is_dir() and any(locks.iterdir()):
        raise UsageError(f"{workdir} is locked by another Snakemake ({locks}). If none runs there (the lock "
                         "outlived a crash or a kill), remove it with `snakemake --unlock` and the same "
                         "arguments, then submit again")


def submit(args) -> int:
    snakemake_args = args.extra[1:] if args.extra[:1] == ["--"] else args.extra
    if not snakemake_args:
        raise UsageError("give Snakemake's arguments, e.g. htcannex submit --profile profiles/local "
                         "-s workflows/protein_lm/Snakefile")
    settings = snakemake_settings(snakemake_args)
    iwd = Path.cwd()
    workdir = Path(settings.directory or iwd).resolve()
    if not workdir.is_dir():
        raise UsageError(f"working directory {workdir} does not exist")
    catalogue = catalogue_of(settings)
    target = driver_target(args, settings, catalogue)
    pool_dir = args.pool_dir or setting(settings, "htcannex_pool_dir") or os.environ.get("HTCANNEX_POOL_DIR")
    # The driver's Snakemake finds the embedded pool relative to its working directory.
    pool_dir = Path(pool_dir).resolve() if pool_dir else workdir / DEFAULT_SPOOL
    try:
        schedd = connect(target, pool_dir if target == EMBEDDED else None).schedd
        check_not_running(schedd, workdir)
        # The embedded pool runs every job as this user.
        owner = job_owner.me() if target == EMBEDDED else job_owner.ask_schedd(schedd)
        check_writable(workdir, owner)
        description, withheld = submit_description(
            python=driver_python(owner, args.python, workdir), iwd=iwd, workdir=workdir,
            snakemake_args=snakemake_args, environment=dict(os.environ), notification=args.notification,
            notify_user=args.notify_user, max_starts=args.max_starts, request_memory=args.request_memory)
        make_driver_dir(workdir, owner)
        job = f"{schedd.submit(description).cluster()}.0"
    except DriverError as error:
        raise UsageError(str(error)) from error
    except (ScheddNotFound, htcondor2.HTCondorException) as error:
        raise UsageError(f"no HTCondor schedd to submit the driver to ({error}). Run htcannex submit on an "
                         "access point (where condor_q works), or use the embedded pool (`pool: local` in "
                         "htcannex.yaml)") from error
    write_record(workdir, job=job, target=target, pool_dir=pool_dir if target == EMBEDDED else None)
    owner.give(record_path(workdir))
    for warning in (withheld_warning(withheld) if withheld else None, annex_mode_warning(settings, catalogue)):
        if warning:
            print(f"htcannex submit: {warning}", file=sys.stderr)
    files = paths.driver_dir(workdir)
    where = "the embedded pool" if target == EMBEDDED else "local universe"
    print(f"Snakemake driver submitted as HTCondor job {job} ({where}, as {owner.name}); "
          f"it runs in {workdir} and survives your logout.\n"
          f"  watch:  htcannex status{'' if workdir == iwd else f' -d {workdir}'}    "
          f"(Snakemake's log: {files / paths.DRIVER_STDERR})\n"
          f"  stop:   htcannex stop{'' if workdir == iwd else f' -d {workdir}'}")
    return 0


def register(nouns) -> None:
    parser = nouns.add_parser(
        "submit", allow_abbrev=False,
        help="run Snakemake as an HTCondor job on this access point and walk away",
        description="Submit Snakemake itself as an HTCondor local-universe job in this directory: it survives "
                    "logout, restarts after an access-point restart or a crash and resumes (nothing is "
                    "submitted twice). Every argument not listed here goes to Snakemake.",
        usage="htcannex submit [OPTIONS] [--] SNAKEMAKE_ARGS...")
    parser.add_argument("--notification", choices=NOTIFICATIONS, default="never",
                        help="HTCondor e-mails you when the driver ends (complete, always) or fails (error)")
    parser.add_argument("--notify-user", metavar="EMAIL", help="where HTCondor sends that e-mail")
    parser.add_argument("--max-starts", type=int, default=DEFAULT_MAX_STARTS,
                        help="the driver is started again after a crash (killed by a signal) until it has "
                             f"been started this often (default {DEFAULT_MAX_STARTS})")
    parser.add_argument("--request-memory", default=DEFAULT_MEMORY,
                        help="memory the driver (Snakemake) asks for, in HTCondor's units; an access point's "
                             f"memory policy may hold a driver that uses more (default {DEFAULT_MEMORY})")
    parser.add_argument("--schedd", choices=(EMBEDDED, DEFAULT),
                        help="where the driver runs: `local` (the embedded pool) or `default` (this access "
                             "point's schedd); default: the embedded pool if the run uses it")
    parser.add_argument("--python", help="the Python the driver runs Snakemake with; the job's owner must be "
                                         "able to run it, with snakemake and htcannex (default: this one; as "
                                         "root, the first python3/python on PATH that the owner can run)")
    parser.add_argument("--pool-dir", help="embedded pool spool (default: as Snakemake's htcannex settings)")
    parser.set_defaults(func=submit, pass_through=True)
