"""What HTCondor tells a job about where it runs and what it expects of it.

HTCondor writes the job's and the slot's ClassAds to files named by ``$_CONDOR_JOB_AD`` and
``$_CONDOR_MACHINE_AD``; outside HTCondor neither exists and the defaults apply.
"""

import json
import os
import socket
from pathlib import Path

import classad2
from htcondor_codes import CHECKPOINT_EXIT_CODE

# Set to "stop" or "continue" to override what the job ad implies (tests, manual runs).
SELF_CHECKPOINT_MODE_VARIABLE = "PROTEIN_LM_SELF_CHECKPOINT"
# Snakemake inside the job turns any failing script into exit status 1; the htcannex job
# wrapper names a file here, which it reads to exit with the checkpoint code instead
# (docs/architecture.md).
CHECKPOINT_EXIT_MARKER_VARIABLE = "HTCANNEX_CHECKPOINT_EXIT_MARKER"


def current_site() -> str:
    """``$HTCANNEX_SITE``, else the slot's AnnexName, else "local"."""
    if os.environ.get("HTCANNEX_SITE"):
        return os.environ["HTCANNEX_SITE"]
    ad = job_environment_ad("_CONDOR_MACHINE_AD")
    if ad is not None and "AnnexName" in ad:
        return str(ad.eval("AnnexName"))
    return "local"


def current_host() -> str:
    return socket.gethostname()


def provenance() -> dict:
    """Where this process trains, for each epoch's record: the site and slot from
    the machine ad, the HTCondor job and what the plan asked of it from the job ad.

    ``job`` is None outside HTCondor (the local executor, a test): nothing then says which job
    or plan the epoch belongs to, and the comparison reports it as unchecked, never as checked.
    """
    machine, job = job_environment_ad("_CONDOR_MACHINE_AD"), job_environment_ad("_CONDOR_JOB_AD")
    record = {"site": current_site(), "slot": None, "job": None, "planned_site": None, "job_rule": None, "job_wildcards": None}
    if machine is not None and "Name" in machine:
        record["slot"] = str(machine.eval("Name"))
    if job is not None:
        record["job"] = f"{job.eval('ClusterId')}.{job.eval('ProcId')}"
        for key, attribute in (("planned_site", "TargetAnnexName"), ("job_rule", "HtcannexRule")):
            if attribute in job:
                record[key] = str(job.eval(attribute))
        if "HtcannexWildcards" in job:
            record["job_wildcards"] = json.loads(str(job.eval("HtcannexWildcards")))
    return record


def checkpoint_exit_code() -> int | None:
    """The exit code that tells HTCondor "checkpoint saved, restart me", or None to keep going.

    Only a job submitted with ``checkpoint_exit_code`` may stop early: anywhere else (the local
    executor) stopping would just fail the rule.
    """
    mode = os.environ.get(SELF_CHECKPOINT_MODE_VARIABLE)
    if mode == "continue":
        return None
    ad = job_environment_ad("_CONDOR_JOB_AD")
    code = int(ad.eval(CHECKPOINT_EXIT_CODE)) if ad is not None and CHECKPOINT_EXIT_CODE in ad else None
    if mode == "stop":
        return code or 85
    if mode not in (None, ""):
        raise ValueError(f"${SELF_CHECKPOINT_MODE_VARIABLE}={mode!r}: use 'stop' or 'continue'")
    return code


def checkpoint_exit_marker() -> Path | None:
    """The file to leave the checkpoint exit code in, as the job's environment names it; None
    outside an htcannex job (nothing there turns the file into the job's exit status)."""
    name = os.environ.get(CHECKPOINT_EXIT_MARKER_VARIABLE)
    return Path(name) if name else None


def job_environment_ad(variable: str) -> classad2.ClassAd | None:
    path = os.environ.get(variable)
    if not path or not Path(path).is_file():
        return None
    return classad2.parseOne(Path(path).read_text())
