"""Orchestration overhead: N no-op jobs through the snakemake CLI, and the latency of one job.

Side by side in one run, on the same Snakefile, each in a fresh copy of the directory:
- local:     `snakemake --cores P --scheduler S` (Snakemake's local executor), S being the
             scheduler profiles/local sets, so both sides pay for the same scheduler;
- htcannex:  `snakemake --executor htcannex --profile profiles/local`, what a user of the
             profile gets (its `jobs` and `max-jobs-per-timespan`: every ready job queued at
             once), on an embedded pool started beforehand with P ordinary slots of 1 CPU, so
             both run P jobs at a time: the pool's slots decide how many run, as HTCondor's do;
- htcannex --jobs P (the sweep only): the same with Snakemake holding all but P jobs back,
             as the profile did before (docs/benchmarks.md says what that costs).

Sweep: N independent no-op jobs; wall time and total CPU: the snakemake process and the
jobs it waited for, plus for htcannex the pool daemon and the jobs it ran (on a real pool
the daemon's share is the access point's and the jobs' the execute points'), printed by
process too: where htcannex's CPU goes.

Latency, from a job's input being ready to its command running: a chain of L no-op jobs,
each reading the previous one's output. Every command writes the time it ran
(`date +%s.%N`), so a link's latency is the difference of two such clocks: the previous
command ran (and, a no-op, ended) -> this command runs. For htcannex that is the whole
round trip: the event log says the job ended, Snakemake sees its output, picks the next
job, the executor submits it, the pool matches and starts it.
"""
import dataclasses
import functools
import statistics
import tempfile
from pathlib import Path

import psutil
import yaml

from .common import REPO, SNAKEMAKE, bench_env, header, load, run_timed, spread

# Each job writes the time its command ran (the latency's clock) as its output, as a
# `shell:`, `script:` or `run:` rule: the three ways a Snakemake job runs its code.
RULE_BODY = {
    "shell": 'shell: "date +%s.%N > {output}"',
    "script": 'script: "stamp.py"',
    "run": 'run:\n        with open(output[0], "w") as stamp:\n            stamp.write(f"{time.time():.6f}")',
}
STAMP_SCRIPT = """\
import time

with open(snakemake.output[0], "w") as stamp:
    stamp.write(f"{time.time():.6f}")
"""
SWEEP = """\
# N no-op jobs (bench/overhead.py).
import time

rule all:
    input: expand("out/{{i}}.txt", i=range({n}))

rule noop:
    output: "out/{{i}}.txt"
    {body}
"""
CHAIN = """\
# A chain of L no-op jobs, each waiting for the previous one (bench/overhead.py).
import time

rule all:
    input: "chain/{last}.txt"

rule link:
    input: lambda wildcards: [] if int(wildcards.i) == 0 else [f"chain/{{int(wildcards.i) - 1}}.txt"]
    output: "chain/{{i}}.txt"
    {body}
"""
SLOT = {"cpus": 1, "memory_mb": 2048}


def add_arguments(parser) -> None:
    group = parser.add_argument_group("overhead")
    group.add_argument("--overhead-jobs", type=int, default=1000, metavar="N",
                       help="no-op jobs in the sweep (default 1000; e.g. 100 for a quick run)")
    group.add_argument("--overhead-parallel", type=int, default=4, metavar="P",
                       help="--cores of the local run = --jobs and pool slots of the htcannex run (default 4, "
                            "the local profile's jobs)")
    group.add_argument("--overhead-chain", type=int, default=30, metavar="L",
                       help="jobs in the chain whose links give the latency (default 30)")
    group.add_argument("--overhead-kinds", nargs="+", choices=sorted(RULE_BODY), default=list(RULE_BODY),
                       metavar="KIND", help="rule kinds to measure (default: shell script run)")
    group.add_argument("--overhead-script-jobs", type=int, default=50, metavar="N",
                       help="jobs in the sweep of script and run rules, which cost a process start each "
                            "(default 50)")


def run(args) -> None:
    parallel, links = args.overhead_parallel, args.overhead_chain
    header(f"overhead: {args.overhead_jobs} shell / {args.overhead_script_jobs} script and run no-op jobs, "
           f"{parallel} at a time; a chain of {links}; {args.repeat} repeats")
    for kind in args.overhead_kinds:
        _measure_kind(args, kind, args.overhead_jobs if kind == "shell" else args.overhead_script_jobs)


def _measure_kind(args, kind: str, n: int) -> None:
    parallel, links = args.overhead_parallel, args.overhead_chain
    body = RULE_BODY[kind]
    variants = {"local": _local, "htcannex": _htcannex}
    # The sweep also with Snakemake submitting only P jobs at a time (--jobs P), as the profile did before.
    sweep_variants = {**variants, f"htcannex --jobs {parallel}": functools.partial(_htcannex, jobs=parallel)}
    walls = {name: [] for name in sweep_variants}
    cpus = {name: [] for name in sweep_variants}
    cpu_parts = {name: [] for name in sweep_variants}  # htcannex's, by process
    latencies = {name: [] for name in variants}
    for repeat in range(args.repeat):
        for name, variant in sweep_variants.items():
            timed = _in_scratch(variant, SWEEP.format(n=n, body=body), parallel)[0]
            walls[name].append(timed.wall_s)
            cpus[name].append(timed.cpu_s)
            if timed.cpu_parts:
                cpu_parts[name].append(timed.cpu_parts)
            print(f"   repeat {repeat + 1} {kind:6} {name:15} sweep {timed.wall_s:8.1f} s  ({load()})", flush=True)
        for name, variant in variants.items():
            workdir_links = _in_scratch(variant, CHAIN.format(last=links - 1, body=body), parallel,
                                        _link_latencies)[1]
            latencies[name].extend(workdir_links)
            print(f"   repeat {repeat + 1} {kind:6} {name:15} chain median link "
                  f"{statistics.median(workdir_links) * 1000:6.0f} ms  ({load()})", flush=True)
    print(f"   {kind}: sweep of {n}, wall time, median [min-max] of repeats:")
    for name, values in walls.items():
        ratio = statistics.median(values) / statistics.median(walls["local"])
        print(f"     {name:15} {spread(values):>22} s   {ratio:5.2f}x local   "
              f"total CPU {statistics.median(cpus[name]) / n * 1000:.1f} ms/job   "
              f"{statistics.median(cpus[name]) / statistics.median(cpus['local']):5.2f}x local CPU")
    for name, runs in cpu_parts.items():
        if runs:
            print(f"     {name} CPU by process, ms/job (median): " + ", ".join(
                f"{part} {statistics.median(parts[part] for parts in runs) / n * 1000:.1f}" for part in runs[0]))
    print(f"   {kind}: latency, previous job's command ran -> this job's command runs ({links - 1} links x "
          f"{args.repeat} repeats), ms:")
    local_median = statistics.median(latencies["local"])
    for name, values in latencies.items():
        print(f"     {name:15} median {statistics.median(values) * 1000:6.0f}   "
              f"p90 {_percentile(values, 0.9) * 1000:6.0f}   max {max(values) * 1000:6.0f}   "
              f"{statistics.median(values) / local_median:5.2f}x local")


def _in_scratch(variant, snakefile: str, parallel: int, measure=None):
    with tempfile.TemporaryDirectory(prefix="htcannex-bench-") as scratch:
        workdir = Path(scratch)
        (workdir / "Snakefile").write_text(snakefile)
        (workdir / "stamp.py").write_text(STAMP_SCRIPT)
        timed = variant(workdir, parallel)
        return timed, measure(workdir) if measure else None


PROFILE = REPO / "profiles" / "local"


def _local(workdir: Path, parallel: int):
    scheduler = yaml.safe_load((PROFILE / "config.yaml").read_text()).get("scheduler", "ilp")
    return run_timed([SNAKEMAKE, "--cores", str(parallel), "--scheduler", scheduler], workdir, bench_env())


def _htcannex(workdir: Path, parallel: int, jobs: int | None = None):
    """`jobs`: Snakemake's --jobs, instead of the profile's."""
    # Imported here: only this variant needs the pool client.
    from htcannex_pool import Pool

    pool = Pool(workdir / "pool", slots=[SLOT] * parallel)
    pool.ensure_running()
    daemon = psutil.Process(pool.status()["pid"])
    try:
        before = daemon.cpu_times()
        timed = run_timed(
            [SNAKEMAKE, "--executor", "htcannex", "--profile", str(PROFILE), "--htcannex-pool-dir",
             str(pool.spool_dir), *(["--jobs", str(jobs)] if jobs else [])],
            workdir, bench_env(),
        )
        after = daemon.cpu_times()
        # The daemon's own CPU, and that of the children it waited for: the jobs.
        parts = {"snakemake": timed.cpu_s,
                 "pool daemon": after.user + after.system - before.user - before.system,
                 "jobs": (after.children_user + after.children_system
                          - before.children_user - before.children_system)}
        return dataclasses.replace(timed, cpu_s=sum(parts.values()), cpu_parts=parts)
    finally:
        pool.stop()


def _link_latencies(workdir: Path) -> list[float]:
    ran = sorted(float(path.read_text()) for path in (workdir / "chain").iterdir())
    return [later - earlier for earlier, later in zip(ran, ran[1:])]


def _percentile(values, fraction: float) -> float:
    ordered = sorted(values)
    return ordered[round(fraction * (len(ordered) - 1))]
