"""The overhead benchmark's htcannex variants on a real HTCondor pool (`--htcondor-config PATH`).

What a real HTCondor's schedd, shadows and starters cost per job, beside the embedded pool's:
the same Snakefiles through the same profile (profiles/local), with `pool: default` and a
catalogue of the running pool's own slots, the snakemake process told where the pool is by
CONDOR_CONFIG. Nothing here starts or configures HTCondor: the pool must be running already.

CPU: utime + stime + cutime + cstime (/proc, through psutil) of every process under the pool's
condor_master, before and after a run: the daemons' own work and that of the processes they
reaped: the schedd's shadows, the startds' starters and, through the starters, the jobs. The
second reading waits until the run's shadows and starters have exited, so that their CPU is in
their parents' cutime. It includes the daemons' periodic work (collector updates, negotiation
cycles), which grows with the run's wall time, not with its jobs: `Pool.idle_cpu_rate` says
how much.

Placement: HTCondor's annex START expression runs only jobs that name the annex
(TargetAnnexName), which htcannex sets only for rotated rules. The catalogue rotates the
bench's rules (`noop`, `link`) round robin over one site per annex and one `pool` site for the
plain slots. Round robin steps by run + chunk; the bench's jobs have a single wildcard, `i`,
which serves as both, so job i goes to site 2i mod k: every site when k is odd (the realpool's
three), so with an even number of sites the last is left out. A group job has no wildcards to
rotate by (it would run on the plain slots only): the group kind is not run here.
"""
import os
import time
from dataclasses import dataclass
from pathlib import Path

import htcondor2
import psutil
import yaml

from snakemake_executor_plugin_htcannex.sites.site import ANNEX_NAME_PREFIX

from .common import SNAKEMAKE, BenchError, Timed, bench_env, run_timed

# The rules of bench/overhead.py's Snakefiles.
RULES = ("noop", "link")
PLAIN_SITE = "pool"
# A run's shadows and starters exit within seconds of its last job; longer means something is stuck.
SETTLE_S = 60
# How long to watch the idle pool for its own periodic CPU.
IDLE_WATCH_S = 10


class NoPool(SystemExit):
    """--htcondor-config names no running pool the benchmark can use: what is wrong and the fix."""

    def __init__(self, config: str, problem: str, fix: str):
        super().__init__(f"python -m bench --htcondor-config {config}: {problem}. Fix: {fix}")


@dataclass
class Pool:
    """A running HTCondor pool: its condor_master's process and the catalogue of its slots."""

    master: psutil.Process
    catalogue: Path  # htcannex.yaml for its slots
    parallel: int  # CPUs of the slots the catalogue rotates over

    def processes(self) -> list[psutil.Process]:
        """The condor_master and every process under it."""
        try:
            return [self.master, *self.master.children(recursive=True)]
        except psutil.NoSuchProcess:
            raise BenchError(f"the pool's condor_master (pid {self.master.pid}) ended during the benchmark: "
                             "someone stopped the pool") from None

    def cpu_by_process(self) -> dict[str, float]:
        """CPU seconds so far of the pool's processes, by kind: own and reaped children."""
        parts = dict.fromkeys(("schedd", "shadows", "startds", "starters and jobs", "other daemons"), 0.0)
        for process in self.processes():
            try:
                name, times = process.name(), process.cpu_times()
            except psutil.NoSuchProcess:  # it ended between the listing and the reading
                continue
            own, reaped = times.user + times.system, times.children_user + times.children_system
            if name == "condor_schedd":
                parts["schedd"] += own
                parts["shadows"] += reaped
            elif name == "condor_startd":
                parts["startds"] += own
                parts["starters and jobs"] += reaped
            elif name == "condor_shadow":  # still running: not yet in the schedd's cutime
                parts["shadows"] += own + reaped
            elif name == "condor_starter":
                parts["starters and jobs"] += own + reaped
            else:
                parts["other daemons"] += own + reaped
        return parts

    def settle(self, *others: str) -> None:
        """Wait until no shadow or starter (or process named in `others`) is left: their CPU is then their
        parents'."""
        deadline = time.monotonic() + SETTLE_S
        while self._runs("condor_shadow", "condor_starter", *others):
            if time.monotonic() > deadline:
                raise BenchError(f"the pool's {', '.join(('shadows', 'starters', *others))} still run {SETTLE_S} s "
                                 "after the run ended")
            time.sleep(0.2)

    def _runs(self, *names: str) -> bool:
        for process in self.processes():
            try:
                if process.name() in names:
                    return True
            except psutil.NoSuchProcess:  # it ended between the listing and the reading
                continue
        return False

    def idle_cpu_rate(self) -> float:
        """CPU seconds per second the pool spends with no job: its periodic work."""
        before = sum(self.cpu_by_process().values())
        time.sleep(IDLE_WATCH_S)
        return (sum(self.cpu_by_process().values()) - before) / IDLE_WATCH_S

    def variant(self, profile: Path, workdir: Path, _parallel: int, jobs: int | None = None) -> Timed:
        """The htcannex variant with `profile` on this pool (whose slots decide how many jobs run at
        a time); `jobs` as in overhead._htcannex."""
        # HTCondor writes the event log and brings outputs and the jobs' stdout back as the job's
        # owner (for root's jobs on a personal pool, the user its daemons run as), into this
        # directory and those Snakemake makes in it (docs/real-access-point.md).
        workdir.chmod(0o777)
        before = self.cpu_by_process()
        timed = run_timed(
            [SNAKEMAKE, "--executor", "htcannex", "--profile", str(profile), "--htcannex-config", str(self.catalogue),
             *(["--jobs", str(jobs)] if jobs else [])],
            workdir, bench_env(), umask=0,
        )
        self.settle()
        after = self.cpu_by_process()
        parts = {"snakemake": timed.cpu_s, **{name: after[name] - before[name] for name in after}}
        return Timed(timed.wall_s, timed.peak_rss_mib, sum(parts.values()), timed.output, parts)



def connect(config: str, directory: Path) -> Pool:
    """The pool `config` (a condor_config) configures, if it answers, with its catalogue written
    to `directory`; NoPool otherwise."""
    if not Path(config).is_file():
        raise NoPool(config, "no such file", "give the condor_config of a running HTCondor pool "
                     "(the one its condor_master was started with)")
    # The snakemake processes inherit it: the executor's `pool: default` finds the pool by it.
    os.environ["CONDOR_CONFIG"] = str(Path(config).resolve())
    htcondor2.reload_config()
    try:
        collector = htcondor2.Collector()
        masters = collector.query(htcondor2.AdTypes.Master, projection=["MyAddress"])
        slots = collector.query(htcondor2.AdTypes.Startd, "SlotType =!= \"Dynamic\"",
                                ["Name", "AnnexName", "Cpus", "Memory", "TotalSlotCpus", "TotalSlotMemory"])
        # Held jobs cost nothing while they wait; idle and running ones would share the pool's CPU.
        queued = htcondor2.Schedd().query("JobStatus == 1 || JobStatus == 2", projection=["ClusterId"])
    except htcondor2.HTCondorException as error:
        raise NoPool(config, f"no HTCondor pool answers there ({error})",
                     "start the pool (condor_master with that CONDOR_CONFIG) or leave out --htcondor-config") from None
    if len(masters) != 1 or not slots:
        raise NoPool(config, f"its collector knows {len(masters)} condor_master(s) and {len(slots)} slot(s); "
                     "the benchmark needs one machine's pool with slots",
                     "start the pool and wait until its master and slots are advertised (seconds after a start)")
    if queued:
        raise NoPool(config, f"its queue holds {len(queued)} idle or running job(s): their CPU would count as the "
                     "benchmark's",
                     "wait for them or remove them (condor_rm) first")
    master = _listening(masters[0]["MyAddress"], config)
    catalogue, parallel = _catalogue(slots)
    path = directory / "htcannex.yaml"
    path.write_text(yaml.safe_dump(catalogue, sort_keys=False))
    return Pool(master, path, parallel)


def _listening(address: str, config: str) -> psutil.Process:
    """The process on this machine that listens at a daemon's address ("<127.0.0.1:9618?...>")."""
    port = int(address.split(":", 1)[1].split("?", 1)[0].rstrip(">"))
    for connection in psutil.net_connections("tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port and connection.pid:
            return psutil.Process(connection.pid)
    raise NoPool(config, f"no process of this machine listens at its condor_master's address {address} "
                 "(or this user may not see it), so the daemons' CPU cannot be read",
                 "run the benchmark on the pool's machine, as root or as the user its daemons run as")


def _catalogue(slots) -> tuple[dict, int]:
    """htcannex.yaml for the pool's slots, and the CPUs of the slots it rotates over."""
    by_site: dict[str, list] = {}
    for slot in slots:
        annex = slot.get("AnnexName")
        by_site.setdefault(annex.removeprefix(ANNEX_NAME_PREFIX) if annex else PLAIN_SITE, []).append(slot)
    names = sorted(by_site)
    names = names[:len(names) - (len(names) + 1) % 2]  # an odd number of sites: see the module's doc
    sites = {}
    for name in names:
        shape = {"cpus": max(_size(slot, "Cpus") for slot in by_site[name]),
                 "memory": f"{max(_size(slot, 'Memory') for slot in by_site[name])}MB"}
        sites[name] = ({"kind": "pool", **shape} if name == PLAIN_SITE else
                       {"kind": "annex", "facts": "catalogue", "gpus": 0, "max_lifetime": "24h", "lifetime": "24h",
                        **shape})
    catalogue = {
        "pool": "default",
        "run_wildcard": "i",
        "chunk_wildcard": "i",
        "rotation": {rule: {"policy": "round-robin", "sites": names} for rule in RULES},
        "annex": {"mode": "off"},
        "sites": sites,
    }
    return catalogue, sum(_size(slot, "Cpus") for name in names for slot in by_site[name])


def _size(slot, resource: str) -> int:
    """A slot's whole `resource`: a partitionable slot advertises as Cpus and Memory only what its dynamic
    slots leave (0 while a claim, one kept idle after its job among them, holds all of it)."""
    return slot.get(f"TotalSlot{resource}", slot[resource])

