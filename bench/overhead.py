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

Group jobs (`--overhead-kinds group`): the shell no-op with `group:`, GROUP_SIZE consecutive
jobs to a group (the sweep's by --group-components, the chain's linked ones by being linked),
so htcannex runs one HTCondor job per group, whose own Snakemake runs its members; the local
executor ignores groups and runs the jobs one by one. Its chain's links across groups are
printed apart: the others are the job's own Snakemake going from one member to the next.

A real HTCondor pool (`--htcondor-config PATH`, bench/htcondor_pool.py): the htcannex variants
run on the embedded pool and, beside them, on that running pool ("htcondor", "htcondor
--jobs P"), all with as many jobs at a time as the real pool's slots have CPUs; the group kind
on the embedded pool only.
"""
import dataclasses
import functools
import statistics
import tempfile
from pathlib import Path

import psutil
import yaml

from . import htcondor_pool
from .common import REPO, SNAKEMAKE, bench_env, header, load, met, run_timed, spread

# Each job writes the time its command ran (the latency's clock) as its output, as a
# `shell:`, `script:` or `run:` rule: the three ways a Snakemake job runs its code.
RULE_BODY = {
    "shell": 'shell: "date +%s.%N > {output}"',
    "script": 'script: "stamp.py"',
    "run": 'run:\n        with open(output[0], "w") as stamp:\n            stamp.write(f"{time.time():.6f}")',
}
GROUP_SIZE = 5
RULE_BODY["group"] = f'group: lambda wildcards: f"noops{{int(wildcards.i) // {GROUP_SIZE}}}"\n    {RULE_BODY["shell"]}'
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
# The goals for what a user of the profile gets ("htcannex" variant) against local, wall time:
# kind -> (the sweep's ratio, a chain link's median ratio). The other kinds have none.
GOALS = {"shell": (1.2, 1.3), "script": (1.5, 2.0)}
SLOT = {"cpus": 1, "memory_mb": 2048}
REAL = "htcondor"


def add_arguments(parser) -> None:
    group = parser.add_argument_group("overhead")
    group.add_argument("--overhead-jobs", type=int, default=1000, metavar="N",
                       help="no-op jobs in the sweep (default 1000; e.g. 100 for a quick run)")
    group.add_argument("--overhead-parallel", type=int, metavar="P",
                       help="how many jobs run at a time: --cores of the local run = the pool's slots of the htcannex "
                            "runs, and --jobs of their '--jobs P' variants (default 4; with --htcondor-config the real "
                            "pool's CPUs)")
    group.add_argument("--overhead-chain", type=int, default=30, metavar="L",
                       help="jobs in the chain whose links give the latency (default 30)")
    group.add_argument("--overhead-kinds", nargs="+", choices=sorted(RULE_BODY), default=list(RULE_BODY),
                       metavar="KIND", help="rule kinds to measure (default: shell script run group; group: "
                                            f"shell jobs in Snakemake groups of {GROUP_SIZE})")
    group.add_argument("--overhead-script-jobs", type=int, default=50, metavar="N",
                       help="jobs in the sweep of script and run rules and of grouped jobs, which cost a "
                            "process start each (per group) (default 50)")
    group.add_argument("--htcondor-config", metavar="PATH",
                       help="also run the htcannex variants on the running HTCondor pool this condor_config "
                            "configures (its condor_config file); refused if none answers")


def run(args) -> None:
    with tempfile.TemporaryDirectory(prefix="htcannex-bench-htcondor-") as scratch:
        real = (htcondor_pool.connect(args.htcondor_config, Path(scratch))
                if args.htcondor_config else None)
        if real and args.overhead_parallel not in (None, real.parallel):
            raise SystemExit(f"--overhead-parallel {args.overhead_parallel}: the pool of --htcondor-config runs "
                             f"{real.parallel} jobs at a time, and every variant runs as many. Fix: leave "
                             "--overhead-parallel out")
        args.overhead_parallel = real.parallel if real else args.overhead_parallel or 4
        header(f"overhead: {args.overhead_jobs} shell / {args.overhead_script_jobs} script, run and grouped no-op "
               f"jobs, {args.overhead_parallel} at a time; a chain of {args.overhead_chain}; {args.repeat} repeats")
        if real:
            print(f"   htcondor: the pool of {args.htcondor_config}, {real.parallel} slot CPUs; its daemons' own "
                  f"CPU when idle: {real.idle_cpu_rate() * 1000:.1f} ms per s of wall time (in its totals below)",
                  flush=True)
        for kind in args.overhead_kinds:
            _measure_kind(args, kind, args.overhead_jobs if kind == "shell" else args.overhead_script_jobs, real)


def _measure_kind(args, kind: str, n: int, real: htcondor_pool.Pool | None = None) -> None:
    parallel, links = args.overhead_parallel, args.overhead_chain
    body = RULE_BODY[kind]
    variants = {"local": _local, "htcannex": _htcannex}
    # The sweep also with Snakemake submitting only P jobs at a time (--jobs P), as the profile did before.
    sweep_variants = {**variants, f"htcannex --jobs {parallel}": functools.partial(_htcannex, jobs=parallel)}
    if real and kind != "group":  # bench/htcondor_pool.py says why not groups
        variants[REAL] = sweep_variants[REAL] = functools.partial(real.variant, PROFILE)
        sweep_variants[f"{REAL} --jobs {parallel}"] = functools.partial(real.variant, PROFILE, jobs=parallel)
    workflow_profile = _group_profile(n) if kind == "group" else None
    walls = {name: [] for name in sweep_variants}
    cpus = {name: [] for name in sweep_variants}
    cpu_parts = {name: [] for name in sweep_variants}  # htcannex's, by process
    latencies = {name: [] for name in variants}
    across_groups = {name: [] for name in variants}
    for repeat in range(args.repeat):
        for name, variant in sweep_variants.items():
            timed = _in_scratch(variant, SWEEP.format(n=n, body=body), parallel, workflow_profile=workflow_profile)[0]
            walls[name].append(timed.wall_s)
            cpus[name].append(timed.cpu_s)
            if timed.cpu_parts:
                cpu_parts[name].append(timed.cpu_parts)
            print(f"   repeat {repeat + 1} {kind:6} {name:15} sweep {timed.wall_s:8.1f} s  ({load()})", flush=True)
        for name, variant in variants.items():
            workdir_links = _in_scratch(variant, CHAIN.format(last=links - 1, body=body), parallel,
                                        _link_latencies)[1]
            latencies[name].extend(workdir_links)
            across_groups[name].extend(workdir_links[GROUP_SIZE - 1::GROUP_SIZE])
            print(f"   repeat {repeat + 1} {kind:6} {name:15} chain median link "
                  f"{statistics.median(workdir_links) * 1000:6.0f} ms  ({load()})", flush=True)
    print(f"   {kind}: sweep of {n}, wall time, median [min-max] of repeats:")
    sweep_goal, link_goal = GOALS.get(kind, (None, None))
    for name, values in walls.items():
        ratio = statistics.median(values) / statistics.median(walls["local"])
        print(f"     {name:15} {spread(values):>22} s   {ratio:5.2f}x local   "
              f"total CPU {statistics.median(cpus[name]) / n * 1000:.1f} ms/job   "
              f"{statistics.median(cpus[name]) / statistics.median(cpus['local']):5.2f}x local CPU"
              f"{_verdict(ratio, sweep_goal) if name == 'htcannex' else ''}")
    for name, runs in cpu_parts.items():
        if runs:
            print(f"     {name} CPU by process, ms/job (median): " + ", ".join(
                f"{part} {statistics.median(parts[part] for parts in runs) / n * 1000:.1f}" for part in runs[0]))
    print(f"   {kind}: latency, previous job's command ran -> this job's command runs ({links - 1} links x "
          f"{args.repeat} repeats), ms:")
    local_median = statistics.median(latencies["local"])
    for name, values in latencies.items():
        ratio = statistics.median(values) / local_median
        print(f"     {name:15} median {statistics.median(values) * 1000:6.0f}   "
              f"p90 {_percentile(values, 0.9) * 1000:6.0f}   max {max(values) * 1000:6.0f}   "
              f"{ratio:5.2f}x local{_verdict(ratio, link_goal) if name == 'htcannex' else ''}")
    if kind == "group" and across_groups["local"]:
        print(f"   group: the links from one group to the next (every {GROUP_SIZE}th), median ms: " + ", ".join(
            f"{name} {statistics.median(values) * 1000:.0f}" for name, values in across_groups.items()))


def _group_profile(n: int) -> dict:
    """The grouped sweep's workflow profile. Snakemake makes a group job of each linked part of a
    group, so one of GROUP_SIZE unlinked jobs only when told to join that many; it asks for the
    summed resources of the members it may run side by side, up to --cores: 1, so that a group
    job fits a slot of 1 CPU and runs its members one after another (the local variant's own
    --cores comes first)."""
    return {"group-components": [f"noops{group}={GROUP_SIZE}" for group in range(-(-n // GROUP_SIZE))],
            "cores": 1}


def _in_scratch(variant, snakefile: str, parallel: int, measure=None, workflow_profile: dict | None = None):
    with tempfile.TemporaryDirectory(prefix="htcannex-bench-") as scratch:
        workdir = Path(scratch)
        (workdir / "Snakefile").write_text(snakefile)
        if workflow_profile:  # Snakemake reads profiles/default/ beside the Snakefile as the workflow's profile
            (workdir / "profiles" / "default").mkdir(parents=True)
            (workdir / "profiles" / "default" / "config.yaml").write_text(yaml.safe_dump(workflow_profile))
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


def _verdict(ratio: float, goal: float | None) -> str:
    return "" if goal is None else f"   goal <= {goal}x: {met(ratio <= goal)}"


def _percentile(values, fraction: float) -> float:
    ordered = sorted(values)
    return ordered[round(fraction * (len(ordered) - 1))]
