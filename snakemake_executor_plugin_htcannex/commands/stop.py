"""`htcannex stop`: end the driver `htcannex submit` started, and its jobs (Ctrl-C, from anywhere).

The driver is removed from the queue; HTCondor sends Snakemake SIGTERM (the
default `remove_kill_sig`: the driver sets none, driver/control.py says why), on which
Snakemake submits nothing more and waits for its running jobs. While the driver
is in the queue, `stop` removes the jobs of its directory, so Snakemake sees them
end and exits. Jobs of this directory still queued once the driver is gone (it
was idle or held) are removed too, unless a Snakemake outside HTCondor drives
this directory now.
"""
import time
from pathlib import Path

import htcondor2
from htcondor_codes import JobStatus

from snakemake_executor_plugin_htcannex.driver.control import CANCEL_GRACE_S, drivers_in_queue, read_record, run_jobs_constraint
from snakemake_executor_plugin_htcannex.driver.entry import other_snakemake
from snakemake_executor_plugin_htcannex.schedd import EMBEDDED, ScheddNotFound, connect, job_id
from snakemake_executor_plugin_htcannex.commands._common import UsageError

REASON = "htcannex stop"


def _job_ids(ads) -> list[str]:
    return [job_id(ad) for ad in ads]


def stop(args) -> int:
    workdir = Path(args.directory).resolve()
    record = read_record(workdir)
    if record is None:
        raise UsageError(f"no driver was submitted in {workdir} (htcannex submit starts one; a snakemake "
                         "running in a terminal stops with Ctrl-C)")
    pool_dir = Path(record["pool_dir"]) if record["pool_dir"] else None
    try:
        schedd = connect(record["schedd"], pool_dir if record["schedd"] == EMBEDDED else None).schedd
    except ScheddNotFound as error:
        raise UsageError(f"the driver of {workdir} was submitted to this access point's schedd, which cannot "
                         f"be reached now: {error}") from error
    queued = drivers_in_queue(schedd, workdir)
    removed = []
    if queued:
        drivers = _job_ids(queued)
        to_remove = _job_ids(ad for ad in queued if ad["JobStatus"] != JobStatus.REMOVED)
        if to_remove:
            schedd.act(htcondor2.JobAction.Remove, to_remove, reason=REASON)
        print(f"removing driver {', '.join(drivers)}: Snakemake submits nothing more, and its jobs are removed")
        deadline = time.time() + args.timeout
        while drivers_in_queue(schedd, workdir):
            # Until Snakemake has taken the SIGTERM, a removed job may be retried: removed in turn.
            jobs = _job_ids(schedd.query(run_jobs_constraint(workdir), ["ClusterId", "ProcId"]))
            if jobs:
                schedd.act(htcondor2.JobAction.Remove, jobs, reason=REASON)
                removed += jobs
            if time.time() > deadline:
                raise UsageError(f"driver {', '.join(drivers)} is still in the queue after {args.timeout:.0f} s; "
                                 "look at it with condor_q / htcannex status, and run htcannex stop again")
            time.sleep(0.5)
        if removed:
            print(f"removed the driver's {len(removed)} job(s): {', '.join(removed)}")
    else:
        print(f"no driver is queued for {workdir} (job {record['job']} has ended)")
    leftovers = _job_ids(schedd.query(run_jobs_constraint(workdir), ["ClusterId", "ProcId"]))
    holder = other_snakemake(workdir) if leftovers else None
    if not leftovers:
        print(f"stopped: no job of {workdir} is left in the queue")
    elif holder is not None:
        print(f"left {len(leftovers)} job(s) queued: Snakemake pid {holder.pid} (not a driver job) drives "
              f"{workdir} now")
    else:
        schedd.act(htcondor2.JobAction.Remove, leftovers, reason=REASON)
        print(f"stopped: removed the {len(leftovers)} job(s) the driver left ({', '.join(leftovers)}); "
              f"no job of {workdir} is left in the queue")
    return 0


def register(nouns) -> None:
    parser = nouns.add_parser("stop", help="stop the driver htcannex submit started, and its jobs")
    parser.add_argument("--directory", "-d", default=".", help="the run's working directory (default: here)")
    parser.add_argument("--timeout", type=float, default=CANCEL_GRACE_S + 30,
                        help="seconds to wait for the driver to leave the queue "
                             f"(default {CANCEL_GRACE_S + 30}: Snakemake's grace before SIGKILL, and more)")
    parser.set_defaults(func=stop)
