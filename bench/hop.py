"""The hop from one job to the next, and what the access point pays for it: htcannex against DAGMan
and the peer plugin on the same jobs, side by side in one run (`--only hop`).

Workloads (each job sleeps --hop-seconds and writes when its command started and when it ended):
- chain:               --hop-chain jobs, each reading the one before, on the plain slots;
- chain over 2 annexes: the same, link i on annex i mod 2 (every hop goes to the other annex);
- sweep:               --hop-sweep independent jobs, then one gathering them all, on the plain slots;
- sweep over 2 annexes: the same, job i on annex i mod 2 (the gather on the plain slots).

Variants:
- htcannex: `snakemake --executor htcannex --profile profiles/local --htcannex-config <catalogue>`,
  the catalogue rotating the annex workloads' rule round robin over the two annexes;
- DAGMan (a real pool only): `condor_submit_dag` of a DAG the benchmark writes, one node per job
  and the same edges, each node's submit description what htcannex submits for it (its file
  transfer, requests and, on an annex, TargetAnnexName), DAGMan's own settings left at their
  defaults (but DAGMAN_USE_STRICT 0: the run directory is under /tmp);
- peer <version> (a real pool, for each of --peer-venvs that holds snakemake and
  snakemake-executor-plugin-htcondor): its `snakemake --executor htcondor` on the shared
  filesystem (its default: no file transfer), with the requests, the annex (a `classad_`
  resource) and `getenv` given through its resources, without which its jobs ask for 8 MB and
  its in-job Snakemake finds no PATH; as root, run as the user the pool runs root's jobs as.

Numbers:
- wall: the command's (DAGMan: from condor_submit_dag to its "EXITING WITH STATUS" line);
- hop (chains): a job's command started - the previous job's command ended, median [max];
- driver CPU: the snakemake process's user + system (and what it waited for); DAGMan's, the
  condor_dagman process's, read every 0.1 s while it runs;
- schedd CPU: the condor_schedd process's own, and its reaped shadows' (DAGMan's taken out);
  on the embedded pool its daemon's;
- schedd commands: the SchedLog's D_COMMAND lines ("Calling HandleReq ... for command") written
  during the run, by command (the pool's SCHEDD_DEBUG must hold D_COMMAND: refused otherwise);
- guidance waits: the starters' "Received the following guidance: 'RetryReqest'" lines written during the
  run (StarterLog*, every starter of the pool's LOG directory): each is a job that waited 5 s to start
  because the shadow had not yet read its input transfer's end (submit/transfer_items.py).

On a real pool (--htcondor-config) the plain slots are those without AnnexName and the annexes
the first two AnnexNames; without it, the embedded pool with one plain 1-CPU slot and two
1-CPU annexes, htcannex only (the tests' smoke run).
"""
import dataclasses
import os
import pwd
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil
import yaml

from snakemake_executor_plugin_htcannex.sites.site import ANNEX_NAME_PREFIX

from . import htcondor_pool
from .common import PYTHON, SNAKEMAKE, BenchError, bench_env, header, load, run_timed

PROFILE = Path(__file__).resolve().parent.parent / "profiles" / "local"
STAMP = "date +%s.%N > {output}; sleep {seconds}; date +%s.%N >> {output}"
GATHER = "cat {input} > {output}"
RULE = "step"  # the rule the annex workloads rotate
# What profiles/local's default-resources ask: the DAG's nodes and the peer's jobs ask the same.
MEMORY_MB, DISK_MB = 512, 1024
ANNEX_MEMORY_MB = 1024  # the smaller annex of the realpool; the embedded annexes have as much
DAG_DONE = re.compile(r"EXITING WITH STATUS (\d+)")
COMMAND = re.compile(r"Calling HandleReq <[^>]*> \(\d+\) for command \d+ \(([A-Z_0-9]+)\)")
# starter_guidance.cpp; COMMAND_RETRY_REQUEST is spelt so in HTCondor's guidance.h.
GUIDANCE_WAIT = "Received the following guidance: 'RetryReqest'"
EMBEDDED_ANNEXES = ("htcannex-expanse", "htcannex-delta")


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    chain: bool  # else a sweep and its gather
    on_annexes: bool


WORKLOADS = (Workload("chain", True, False), Workload("chain over 2 annexes", True, True),
             Workload("sweep", False, False), Workload("sweep over 2 annexes", False, True))


@dataclasses.dataclass
class Result:
    wall_s: float
    hops_s: list[float]
    driver_cpu_s: float | None
    schedd_cpu_s: float | None
    shadows_cpu_s: float | None
    commands: Counter | None
    guidance_waits: int | None = None


def add_arguments(parser) -> None:
    group = parser.add_argument_group("hop")
    group.add_argument("--hop-chain", type=int, default=10, metavar="L", help="jobs in each chain (default 10)")
    group.add_argument("--hop-sweep", type=int, default=60, metavar="N", help="jobs in each sweep (default 60)")
    group.add_argument("--hop-seconds", type=float, default=1, metavar="S", help="each job's sleep (default 1)")
    group.add_argument("--hop-workloads", nargs="+", choices=[w.name for w in WORKLOADS],
                       default=[w.name for w in WORKLOADS], metavar="NAME",
                       help="workloads to run (default: all): " + ", ".join(repr(w.name) for w in WORKLOADS))


def run(args) -> None:
    with tempfile.TemporaryDirectory(prefix="htcannex-bench-hop-") as scratch:
        Path(scratch).chmod(0o755)  # a real pool's jobs run as another user, who must reach the run directories
        pool = RealPool(args, Path(scratch)) if args.htcondor_config else EmbeddedPool(args, Path(scratch) / "pool")
        try:
            header(f"hop: chains of {args.hop_chain} and sweeps of {args.hop_sweep} + gather, {args.hop_seconds:g}-s "
                   f"jobs, on {pool.label}")
            variants = {"htcannex": pool.htcannex, **pool.others(args.peer_venvs)}
            table = []
            for workload in (w for w in WORKLOADS if w.name in args.hop_workloads):
                for name, variant in variants.items():
                    for repeat in range(args.repeat):
                        workdir = Path(tempfile.mkdtemp(prefix="w-", dir=scratch))
                        workdir.chmod(0o777)  # HTCondor writes outputs and logs there as the job's owner
                        result = variant(workload, _jobs(workload, args), workdir)
                        result.hops_s = _hops(workdir) if workload.chain else []
                        table.append((workload.name, name, result))
                        print(f"   {workload.name:22} {name:12} {_row(result, args)}  ({load()})", flush=True)
            _print_table(table, args)
        finally:
            pool.close()


def _jobs(workload: Workload, args) -> list[dict]:
    """The workload's jobs in order: output, inputs, annex index (None: the plain slots), command."""
    count = args.hop_chain if workload.chain else args.hop_sweep
    jobs = [{"output": f"steps/0/{i}.txt", "inputs": [f"steps/0/{i - 1}.txt"] if workload.chain and i else [],
             "annex": i % 2 if workload.on_annexes else None} for i in range(count)]
    if not workload.chain:
        jobs.append({"output": "gathered.txt", "inputs": [job["output"] for job in jobs], "annex": None})
    return jobs


def snakefile(workload: Workload, args, peer_annexes: tuple[str, ...] = ()) -> str:
    """The workload as a Snakefile; `peer_annexes`: the annex of each rotated job named through the peer's
    `classad_` resource (htcannex places them through its catalogue)."""
    stamp = STAMP.format(output="{output}", seconds=f"{args.hop_seconds:g}")
    step_input = ('lambda w: [] if int(w.chunk) == 0 else [f"steps/{w.run}/{int(w.chunk) - 1}.txt"]'
                  if workload.chain else "[]")
    resources = (f"\n    resources: classad_TargetAnnexName=lambda w: {list(peer_annexes)!r}[int(w.chunk) % 2]"
                 if peer_annexes and workload.on_annexes else "")
    last = f'"steps/0/{args.hop_chain - 1}.txt"' if workload.chain else '"gathered.txt"'
    text = (f"# bench/hop.py: {workload.name}\n\nrule all:\n    input: {last}\n\n"
            f"rule {RULE}:\n    input: {step_input}\n    output: \"steps/{{run}}/{{chunk}}.txt\"{resources}\n"
            f"    shell: {stamp!r}\n")
    if not workload.chain:
        text += (f"\nrule gather:\n    input: expand(\"steps/0/{{chunk}}.txt\", chunk=range({args.hop_sweep}))\n"
                 f"    output: \"gathered.txt\"\n    shell: {GATHER!r}\n")
    return text


def _catalogue(pool: str, annexes: tuple[str, ...], rotated: bool) -> dict:
    sites = [annex.removeprefix(ANNEX_NAME_PREFIX) for annex in annexes]
    return {"pool": pool,
            "rotation": {RULE: {"policy": "round-robin", "sites": sites}} if rotated else {},
            "annex": {"mode": "off"},
            "sites": {site: {"kind": "annex", "facts": "catalogue", "cpus": 1, "memory": f"{ANNEX_MEMORY_MB}MB", "gpus": 0,
                             "max_lifetime": "24h", "lifetime": "24h"} for site in sites}}


def _htcannex(workload: Workload, args, workdir: Path, pool: str, annexes, extra=()):
    (workdir / "Snakefile").write_text(snakefile(workload, args))
    (workdir / "htcannex.yaml").write_text(yaml.safe_dump(_catalogue(pool, annexes, workload.on_annexes)))
    return run_timed([SNAKEMAKE, "--executor", "htcannex", "--profile", str(PROFILE), "--htcannex-config",
                      str(workdir / "htcannex.yaml"), *extra], workdir, bench_env(), umask=0)


class EmbeddedPool:
    """The embedded pool: one plain 1-CPU slot and two 1-CPU annexes."""

    label = "the embedded pool (one plain 1-CPU slot, two 1-CPU annexes)"

    def __init__(self, args, spool: Path):
        from htcannex_pool import Pool  # only this pool needs it

        self.args = args
        self.pool = Pool(spool, slots=[{"cpus": 1, "memory_mb": 2048}])
        self.pool.ensure_running()
        for annex in EMBEDDED_ANNEXES:
            self.pool.create_annex(annex, owner=psutil.Process().username(), cpus=1, memory_mb=ANNEX_MEMORY_MB, lifetime_s=86400)
        self.daemon = psutil.Process(self.pool.status()["pid"])

    def others(self, _peer_venvs) -> dict:
        return {}  # DAGMan and the peer need a real pool

    def htcannex(self, workload: Workload, jobs, workdir: Path) -> Result:
        before = self.daemon.cpu_times()
        timed = _htcannex(workload, self.args, workdir, "local", EMBEDDED_ANNEXES,
                          ["--htcannex-pool-dir", str(self.pool.spool_dir)])
        after = self.daemon.cpu_times()
        return Result(timed.wall_s, [], timed.cpu_s, after.user + after.system - before.user - before.system,
                      None, None)

    def close(self) -> None:
        self.pool.stop()


class RealPool:
    """A running HTCondor pool (--htcondor-config): its plain slots, two annexes, its schedd and SchedLog."""

    def __init__(self, args, scratch: Path):
        import htcondor2  # connect() has pointed the bindings at the pool

        self.args = args
        self.pool = htcondor_pool.connect(args.htcondor_config, scratch)  # refuses a pool it cannot use
        slots = htcondor2.Collector().query(htcondor2.AdTypes.Startd, "AnnexName isnt undefined", ["AnnexName"])
        self.annexes = tuple(sorted({slot["AnnexName"] for slot in slots}))[:2]
        config = args.htcondor_config
        if len(self.annexes) < 2:
            raise htcondor_pool.NoPool(config, f"its slots have {len(self.annexes)} AnnexName(s); the annex workloads "
                                       "need two", "start a pool with two annexes (the realpool's condor_config)")
        if "D_COMMAND" not in htcondor2.param.get("SCHEDD_DEBUG", ""):
            raise htcondor_pool.NoPool(config, "its SCHEDD_DEBUG lacks D_COMMAND, so the SchedLog does not say which "
                                       "commands the schedd served", "add `SCHEDD_DEBUG = $(SCHEDD_DEBUG) D_COMMAND` to "
                                       "its condor_config and `condor_reconfig -daemon schedd`")
        self.schedd_log = Path(htcondor2.param["SCHEDD_LOG"])
        self.log_dir = Path(htcondor2.param["LOG"])
        self.bin = Path(htcondor2.param["BIN"])
        self.htcondor2 = htcondor2
        version = subprocess.run([str(self.bin / "condor_version")], capture_output=True, text=True).stdout.split()
        self.label = (f"the HTCondor pool of {config} ({' '.join(version[:2])}, NEGOTIATOR_INTERVAL "
                      f"{htcondor2.param.get('NEGOTIATOR_INTERVAL', 60)} s, annexes {', '.join(self.annexes)})")

    def others(self, peer_venvs) -> dict:
        variants = {"DAGMan": self.dagman}
        for venv in peer_venvs:
            version = _peer_version(venv)
            if version is None:
                print(f"   peer plugin not measured: no snakemake with snakemake-executor-plugin-htcondor in {venv}")
            else:
                variants[f"peer {version}"] = lambda workload, jobs, workdir, venv=venv: self.peer(venv, workload, workdir)
        return variants

    def htcannex(self, workload: Workload, jobs, workdir: Path) -> Result:
        def go():
            timed = _htcannex(workload, self.args, workdir, "default", self.annexes)
            return timed.wall_s, timed.cpu_s
        return self._measured(go)

    def peer(self, venv: Path, workload: Workload, workdir: Path) -> Result:
        (workdir / "Snakefile").write_text(snakefile(workload, self.args, self.annexes))
        env = {**bench_env(), "PATH": f"{venv / 'bin'}:{bench_env()['PATH']}"}

        # Its jobs run Snakemake, which reads a source cache that Snakemake makes private to the user who submits:
        # as root, whose jobs the pool runs as the user of its daemons (CONDOR_IDS), submit as that user.
        as_user = ([] if os.geteuid() != 0 else
                   ["runuser", "-u", pwd.getpwuid(int(self.htcondor2.param["CONDOR_IDS"].split(".")[0])).pw_name, "--"])

        def go():
            # As the local profile runs htcannex: every ready job queued, status checked every second.
            timed = run_timed([*as_user, str(venv / "bin" / "snakemake"), "--executor", "htcondor", "--jobs", "unlimited",
                               "--seconds-between-status-checks", "1", "--scheduler", "greedy", "--latency-wait", "5",
                               "--default-resources", f"request_memory={MEMORY_MB}", f"request_disk='{DISK_MB}MB'",
                               "getenv='True'"], workdir, env, umask=0)
            return timed.wall_s, timed.cpu_s
        return self._measured(go)

    def dagman(self, workload: Workload, jobs, workdir: Path) -> Result:
        dag = self._write_dag(workload, jobs, workdir)
        dagman_cpu = []

        def go():
            started = time.perf_counter()
            submitted = subprocess.run([str(self.bin / "condor_submit_dag"), "-force", str(dag)], cwd=workdir,
                                       capture_output=True, text=True,  # it looks for condor_dagman on PATH
                                       env={**bench_env(), "PATH": f"{self.bin}:{bench_env()['PATH']}"})
            if submitted.returncode != 0:
                raise BenchError(f"condor_submit_dag {dag} exited {submitted.returncode}: {submitted.stdout}"
                                 f"{submitted.stderr}")
            out, dagman = Path(f"{dag}.dagman.out"), None
            while not (done := DAG_DONE.search(out.read_text() if out.exists() else "")):
                dagman = dagman or next((process for process in self.pool.processes()
                                         if process.name() == "condor_dagman"), None)
                try:  # its CPU as of this look: the last look misses at most a tenth of a second of it
                    times = dagman.cpu_times() if dagman else None
                    dagman_cpu[:] = [times.user + times.system] if times else dagman_cpu
                except psutil.NoSuchProcess:
                    pass
                time.sleep(0.1)
            if done[1] != "0":
                raise BenchError(f"DAGMan exited {done[1]}; the end of {out}:\n{out.read_text()[-3000:]}")
            return time.perf_counter() - started, None
        result = self._measured(go)
        result.driver_cpu_s = dagman_cpu[0] if dagman_cpu else 0.0
        result.shadows_cpu_s -= result.driver_cpu_s  # the schedd reaped DAGMan too
        return result

    def _write_dag(self, workload: Workload, jobs, workdir: Path) -> Path:
        """One node per job, its submit description what htcannex submits for it (build_submit), less the log
        (DAGMan gives its nodes its own) and keep_claim_idle (DAGMan sets it, DAGMAN_HOLD_CLAIM_TIME)."""
        from snakemake_executor_plugin_htcannex.sites.catalogue import load_catalogue
        from snakemake_executor_plugin_htcannex.sites.placement import decided_at
        from snakemake_executor_plugin_htcannex.submit.description import JobSpec, SubmitOptions, build_submit
        from snakemake_executor_plugin_htcannex.submit.job_spec import JobCommand, sandbox_steps
        from snakemake_executor_plugin_htcannex.submit.request import job_request

        catalogue_path = workdir / "htcannex.yaml"
        catalogue_path.write_text(yaml.safe_dump(_catalogue("default", self.annexes, False)))
        sites = load_catalogue(catalogue_path).sites
        options = SubmitOptions(workdir, workdir / "unused.log", few_transfer_items=True)  # as on a real pool
        options.logs_dir.mkdir(parents=True, mode=0o777)
        options.logs_dir.chmod(0o777)
        lines = []
        for number, job in enumerate(jobs):
            command = (GATHER.format(input=" ".join(job["inputs"]), output=job["output"]) if job["output"] == "gathered.txt"
                       else STAMP.format(output=job["output"], seconds=f"{self.args.hop_seconds:g}"))
            # What the job's shell does before the command, and what it transfers, as htcannex's on a real pool.
            before, _, flat_input = sandbox_steps({"inputs": job["inputs"], "outputs": [job["output"]]},
                                                  JobCommand("/bin/sh", command, runs_snakemake=False), options)
            spec = JobSpec(RULE, number, ["/bin/sh", "-c", " && ".join(filter(None, (before, command)))],
                           inputs=job["inputs"], outputs=[job["output"]], flat_input=flat_input,
                           resources={"mem_mb": MEMORY_MB, "disk_mb": DISK_MB}, ships_workflow_sources=False,
                           needs_output_directories=True)
            site = None if job["annex"] is None else sites[self.annexes[job["annex"]].removeprefix(ANNEX_NAME_PREFIX)]
            description = dict(build_submit(spec, decided_at(site, job_request(RULE, spec.resources, 1), RULE), options).items())
            for command_name in ("log", "keep_claim_idle"):
                description.pop(command_name)
            (workdir / f"node{number}.sub").write_text(
                "".join(f"{key} = {value}\n" for key, value in description.items()) + "queue\n")
            lines.append(f"JOB node{number} node{number}.sub")
        for number, job in enumerate(jobs):
            for parent in (index for index, other in enumerate(jobs) if other["output"] in job["inputs"]):
                lines.append(f"PARENT node{parent} CHILD node{number}")
        # The run directory is under /tmp, where DAGMan's strict mode refuses to keep its node log.
        (workdir / "hop.dag.config").write_text("DAGMAN_USE_STRICT = 0\n")
        lines.append("CONFIG hop.dag.config")
        dag = workdir / "hop.dag"
        dag.write_text("\n".join(lines) + "\n")
        return dag

    def _measured(self, go) -> Result:
        """Run `go` (-> wall, driver CPU) and what the schedd did meanwhile, once its shadows have exited."""
        schedd = next(process for process in self.pool.processes() if process.name() == "condor_schedd")
        offset = self.schedd_log.stat().st_size
        starter_offsets = {path: path.stat().st_size for path in self.starter_logs()}
        before = schedd.cpu_times()
        wall, driver = go()
        self.pool.settle("condor_dagman")
        after = schedd.cpu_times()
        return Result(wall, [], driver, after.user + after.system - before.user - before.system,
                      after.children_user + after.children_system - before.children_user - before.children_system,
                      self._commands_since(offset), self._guidance_waits_since(starter_offsets))

    def starter_logs(self) -> list[Path]:
        return sorted(self.log_dir.glob("StarterLog*"))

    def _guidance_waits_since(self, offsets: dict) -> int:
        """The starters' 5-s guidance waits written since `offsets` (a log rotated meanwhile: all of the new one)."""
        waits = 0
        for path in self.starter_logs():
            with open(path, errors="replace") as log:
                start = offsets.get(path, 0)
                log.seek(start if log.seek(0, 2) >= start else 0)
                waits += log.read().count(GUIDANCE_WAIT)
        return waits

    def _commands_since(self, offset: int) -> Counter:
        with open(self.schedd_log, errors="replace") as log:
            if log.seek(0, 2) < offset:
                raise BenchError(f"{self.schedd_log} was rotated during the run: its commands cannot be counted "
                                 "(raise MAX_SCHEDD_LOG)")
            log.seek(offset)
            return Counter(match[1] for match in COMMAND.finditer(log.read()))

    def close(self) -> None:
        pass


def _peer_version(venv: Path) -> str | None:
    found = sorted(venv.glob("lib/python*/site-packages/snakemake_executor_plugin_htcondor-*.dist-info"))
    if not found or not (venv / "bin" / "snakemake").exists():
        return None
    return found[-1].name.removeprefix("snakemake_executor_plugin_htcondor-").removesuffix(".dist-info")


def _hops(workdir: Path) -> list[float]:
    """Each chain link's command start minus the previous one's end (the jobs' own clocks)."""
    stamps = sorted(tuple(map(float, path.read_text().split())) for path in (workdir / "steps" / "0").iterdir())
    return [later[0] - earlier[1] for earlier, later in zip(stamps, stamps[1:])]


def _row(result: Result, args) -> str:
    hop = (f"hop median {statistics.median(result.hops_s):5.2f} s max {max(result.hops_s):5.2f} s"
           if result.hops_s else "")
    driver = "n/a" if result.driver_cpu_s is None else f"{result.driver_cpu_s:.2f} s"
    schedd = "" if result.schedd_cpu_s is None else f"schedd CPU {result.schedd_cpu_s:.2f} s"
    waits = "" if result.guidance_waits is None else f"  guidance waits {result.guidance_waits}"
    return f"wall {result.wall_s:6.1f} s  {hop}  driver CPU {driver}  {schedd}{waits}"


def _print_table(table, args) -> None:
    """One line per workload and variant (the median repeat by wall time) and, on a real pool, the schedd's
    commands of that run per job."""
    print("\n   | workload | variant | wall | median hop [max] | 5-s guidance waits | driver CPU | "
          "schedd CPU (own, shadows) | schedd commands per job |")
    print("   |---|---|---|---|---|---|---|---|")
    runs: dict = {}
    for workload, variant, result in table:
        runs.setdefault((workload, variant), []).append(result)
    for (workload, variant), results in runs.items():
        result = sorted(results, key=lambda r: r.wall_s)[len(results) // 2]
        jobs = args.hop_chain if workload.startswith("chain") else args.hop_sweep + 1
        hop = (f"{statistics.median(result.hops_s):.2f} [{max(result.hops_s):.2f}] s" if result.hops_s else "")
        driver = "" if result.driver_cpu_s is None else f"{result.driver_cpu_s:.2f} s"
        schedd = ("" if result.schedd_cpu_s is None else f"{result.schedd_cpu_s:.2f} s"
                  + ("" if result.shadows_cpu_s is None else f", {result.shadows_cpu_s:.2f} s"))
        commands = ("" if result.commands is None else ", ".join(
            f"{name} {count / jobs:.2g}" for name, count in result.commands.most_common()))
        waits = "" if result.guidance_waits is None else str(result.guidance_waits)
        print(f"   | {workload} | {variant} | {result.wall_s:.1f} s | {hop} | {waits} | {driver} | {schedd} | {commands} |")
