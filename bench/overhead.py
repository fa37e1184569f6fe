"""Orchestration overhead: a sweep of N no-op jobs through the snakemake CLI.

Side by side in one run, on the same Snakefile, each in a fresh copy of the directory:
- local:     `snakemake --cores P` (Snakemake's local executor);
- htcannex:  `snakemake --executor htcannex --profile profiles/local --jobs P`, on an
             embedded pool started beforehand with P ordinary slots of 1 CPU, so both
             run P jobs at a time.
Submit-side CPU is the snakemake process's own (for htcannex the jobs are children of the
pool daemon, so their Snakemake start-up is not in it: on a real pool it is spent on the
execute points). Per job (htcannex): submit -> execute in the event log (the pool's queueing), submit ->
the no-op command running (it writes `date +%s.%N`: includes the job's own Snakemake
start-up), terminate -> Snakemake reporting it finished; and Snakemake's own view,
issued -> finished, for local and htcannex alike.
"""
import statistics
import tempfile
from pathlib import Path

import htcondor2

from . import snakemake_log
from .common import REPO, SNAKEMAKE, bench_env, header, load, run_timed, spread

SNAKEFILE = """\
# N no-op jobs; each writes when its command ran (bench/overhead.py reads it).
rule all:
    input: expand("out/{{i}}.txt", i=range({n}))

rule noop:
    output: "out/{{i}}.txt"
    shell: "date +%s.%N > {{output}}"
"""
SLOT = {"cpus": 1, "memory_mb": 2048}


def add_arguments(parser) -> None:
    group = parser.add_argument_group("overhead")
    group.add_argument("--overhead-jobs", type=int, default=1000, metavar="N",
                       help="no-op jobs in the sweep (default 1000; e.g. 100 for a quick run)")
    group.add_argument("--overhead-parallel", type=int, default=4, metavar="P",
                       help="--cores of the local run = --jobs and pool slots of the htcannex run (default 4, "
                            "the local profile's jobs)")


def run(args) -> None:
    n, parallel = args.overhead_jobs, args.overhead_parallel
    header(f"overhead: {n} no-op jobs, {parallel} at a time, {args.repeat} repeats")
    variants = {"local": _local, "htcannex": _htcannex}
    walls = {name: [] for name in variants}
    cpus = {name: [] for name in variants}
    latencies = []
    for repeat in range(args.repeat):
        for name, variant in variants.items():
            with tempfile.TemporaryDirectory(prefix="htcannex-bench-") as scratch:
                workdir = Path(scratch)
                (workdir / "Snakefile").write_text(SNAKEFILE.format(n=n))
                timed, latency = variant(workdir, parallel)
                walls[name].append(timed.wall_s)
                cpus[name].append(timed.cpu_s)
                if latency:
                    latencies.append(latency)
            print(f"   repeat {repeat + 1} {name:14} {timed.wall_s:8.1f} s  ({load()})", flush=True)
    print("   wall time, median [min-max] of repeats:")
    for name, values in walls.items():
        ratio = statistics.median(values) / statistics.median(walls["local"])
        print(f"     {name:14} {spread(values):>22} s   {ratio:6.1f}x local   "
              f"submit-side CPU {statistics.median(cpus[name]) / n * 1000:.0f} ms/job")
    for key, label in _LATENCY_LABELS.items():
        values = [latency[key] for latency in latencies if latency.get(key) is not None]
        if values:
            print(f"   {label}: median {statistics.median(values):.2f} s (median of per-repeat medians)")


_LATENCY_LABELS = {
    "pool_queue_s": "htcannex submit -> execute event (event log, 1 s resolution)",
    "command_start_s": "htcannex submit event -> no-op command running (its own Snakemake started)",
    "report_s": "htcannex terminate event -> Snakemake reports finished (1 s resolution)",
    "snakemake_view_s": "htcannex issued -> finished, Snakemake's log (1 s resolution)",
    "local_view_s": "local issued -> finished, Snakemake's log (1 s resolution)",
}


def _local(workdir: Path, parallel: int):
    timed = run_timed([SNAKEMAKE, "--cores", str(parallel)], workdir, bench_env())
    jobs = snakemake_log.parse(timed.output)
    return timed, {"local_view_s": _median_finish(jobs)}


def _htcannex(workdir: Path, parallel: int):
    # Imported here: only this variant needs the pool client.
    from snakemake_executor_plugin_htcannex.pool import Pool

    pool = Pool(workdir / "pool", slots=[SLOT] * parallel)
    pool.ensure_running()
    try:
        timed = run_timed(
            [SNAKEMAKE, "--executor", "htcannex", "--profile", str(REPO / "profiles" / "local"),
             "--jobs", str(parallel), "--htcannex-pool-dir", str(pool.spool_dir)],
            workdir, bench_env(),
        )
    finally:
        pool.stop()
    return timed, _job_latencies(workdir, snakemake_log.parse(timed.output))


def _median_finish(jobs) -> float:
    return statistics.median(job.finished - job.issued for job in jobs.values()
                             if job.rule == "noop" and job.finished is not None)


def _job_latencies(workdir: Path, jobs) -> dict:
    """Medians over the no-op jobs of one htcannex run."""
    events = {}
    for event in htcondor2.JobEventLog(str(workdir / ".htcannex" / "jobs.log")).events(stop_after=0):
        events.setdefault(f"{event.cluster}.{event.proc}", {})[event.type] = event.timestamp
    queue, start, report = [], [], []
    for job in jobs.values():
        if job.rule != "noop" or job.condor_id not in events:
            continue
        times = events[job.condor_id]
        submitted = times[htcondor2.JobEventType.SUBMIT]
        queue.append(times[htcondor2.JobEventType.EXECUTE] - submitted)
        start.append(float((workdir / job.output).read_text()) - submitted)
        if job.finished is not None:
            report.append(job.finished - times[htcondor2.JobEventType.JOB_TERMINATED])
    return {
        "pool_queue_s": statistics.median(queue),
        "command_start_s": statistics.median(start),
        "report_s": statistics.median(report),
        "snakemake_view_s": _median_finish(jobs),
    }
