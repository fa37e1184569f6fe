"""Scale: planning a runs x chunks sweep (30 x 30 and 1,000 x 30 by default).

The Snakefile is a chain shaped like protein_lm's training: rule `train_chunk` with
wildcards `run` and `chunk` (the names the profile rotates), chunk k reading checkpoint
k-1. Side by side, wall time, CPU time (user + system: what load from other processes does
not inflate) and peak RSS of:
- local:    `snakemake -n --cores 4`;
- local, the profile's defaults: the same with the local profile's `default-resources`, which
            Snakemake evaluates for every job (here `disk_mb`: the rule sets the others): the part
            of htcannex's cost that any profile with those defaults has, shown, not judged;
- htcannex: `snakemake -n --executor htcannex --profile profiles/local`, as a user runs it
            (Snakemake's dry run does not call the executor; profile, settings and plugin load do,
            and the htcannex logger plugin prints the plan);
- plan:     `htcannex annex plan --profile profiles/local`: the run x chunk -> site table, the
            rotation's extra work, which every real htcannex run also does before submitting.
"""
import statistics
import tempfile
from pathlib import Path

import yaml

from .common import REPO, SNAKEMAKE, bench_env, header, load, met, run_timed, spread

SNAKEFILE = """\
# {runs} runs x {chunks} chunks; chunk k resumes from checkpoint k-1 (as protein_lm's train_chunk).
RUNS = [f"r{{i:04d}}" for i in range({runs})]
CHUNKS = {chunks}


def previous_checkpoint(wildcards):
    chunk = int(wildcards.chunk)
    return [f"results/{{wildcards.run}}/chunk{{chunk - 1}}.pt"] if chunk > 1 else []


rule all:
    input: expand("results/{{run}}/chunk{{chunk}}.pt", run=RUNS, chunk=CHUNKS)


rule train_chunk:
    input: previous_checkpoint
    output: "results/{{run}}/chunk{{chunk}}.pt"
    wildcard_constraints: chunk=r"\\d+"
    threads: 1
    resources: mem_mb=1000, runtime=30
    shell: "touch {{output}}"
"""
GOAL_S, GOAL_MIB, GOAL_RATIO = 60.0, 1024.0, 1.1  # CPU time, peak RSS, CPU against `snakemake -n`


def add_arguments(parser) -> None:
    group = parser.add_argument_group("scale")
    group.add_argument("--scale-sweeps", nargs="+", default=["30x30", "1000x30"], metavar="RUNSxCHUNKS",
                       help="sweeps to plan (default 30x30 1000x30)")


def run(args) -> None:
    header(f"scale: planning sweeps {' '.join(args.scale_sweeps)}, {args.repeat} repeats")
    htcannex = str(Path(SNAKEMAKE).parent / "htcannex")
    profile = REPO / "profiles" / "local"
    defaults = yaml.safe_load((profile / "config.yaml").read_text())["default-resources"]
    variants = {
        "local -n": [SNAKEMAKE, "-n", "--cores", "4", "--quiet", "rules"],
        "local -n, defaults": [SNAKEMAKE, "-n", "--cores", "4", "--quiet", "rules", "--default-resources",
                               *(f"{name}={value}" for name, value in defaults.items())],
        "htcannex -n": [SNAKEMAKE, "-n", "--executor", "htcannex", "--profile", str(profile), "--quiet", "rules"],
        "annex plan": [htcannex, "annex", "plan", "--profile", str(profile)],
    }
    for sweep in args.scale_sweeps:
        runs, chunks = (int(part) for part in sweep.lower().split("x"))
        results = {name: [] for name in variants}
        with tempfile.TemporaryDirectory(prefix="htcannex-bench-") as scratch:
            workdir = Path(scratch)
            (workdir / "Snakefile").write_text(SNAKEFILE.format(runs=runs, chunks=chunks))
            for repeat in range(args.repeat):
                # A different variant goes first each repeat: the first pays for cold caches.
                names = list(variants)
                for name in names[repeat % len(names):] + names[:repeat % len(names)]:
                    results[name].append(run_timed(variants[name], workdir, bench_env()))
                print(f"   {sweep} repeat {repeat + 1}: " + ", ".join(
                    f"{name} {timings[-1].wall_s:.1f} s" for name, timings in results.items()) + f"  ({load()})",
                    flush=True)
        jobs = runs * chunks
        local_cpu = [t.cpu_s for t in results["local -n"]]
        print(f"   {sweep} = {jobs} jobs; median [min-max] of {args.repeat}; x local: CPU against local -n's "
              "in the same repeat (interleaved), median [min-max], and the fastest repeat's against local's fastest "
              "(least disturbed by the machine's load):")
        for name, timings in results.items():
            wall = [t.wall_s for t in timings]
            rss = [t.peak_rss_mib for t in timings]
            cpu = [t.cpu_s for t in timings]
            ratios = [mine / local for mine, local in zip(cpu, local_cpu)]
            # Judged on CPU: the process is single-threaded, so its CPU time is its wall time on
            # an idle core; wall time here depends on what else the shared machine runs.
            within_goal = (statistics.median(cpu) < GOAL_S and statistics.median(rss) < GOAL_MIB
                           and statistics.median(ratios) <= GOAL_RATIO)
            verdict = ("" if name == "local -n, defaults" else
                       f"  goal (<{GOAL_S:.0f} s CPU, <={GOAL_RATIO}x local, <1 GiB) {met(within_goal)}")
            print(f"     {name:18} wall {spread(wall):>20} s  CPU {spread(cpu):>20} s  peak RSS {spread(rss):>18} MiB  "
                  f"{spread(ratios)}x local CPU, fastest {min(cpu) / min(local_cpu):.3g}x{verdict}")
        with_defaults = [t.cpu_s for t in results["local -n, defaults"]]
        print(f"     htcannex -n against local -n with the profile's default-resources, paired: "
              f"{spread(t.cpu_s / d for t, d in zip(results['htcannex -n'], with_defaults))}x CPU "
              "(what the htcannex plugins and profile add besides Snakemake evaluating those defaults)")
