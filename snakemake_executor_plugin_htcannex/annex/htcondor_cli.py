"""Annexes on a real access point, through HTCondor's own command line: `htcondor annex create NAME
QUEUE@SYSTEM` (ssh to the system's login host, a Slurm job there whose pilot joins this pool),
`htcondor annex add` for a name HTCondor already has a request for, `htcondor annex shutdown`, and
`scancel` at the login host for a request still waiting in the batch queue.

The queue@system form needs ANNEX_USE_OLD_CREATE; the 25.x default form only builds a tarball for the
user to run at the site, which an executor cannot do.

What HTCondor keeps of a request (htcondor_cli/annex_create.py): a local-universe job on the access
point with hpc_annex_name, hpc_annex_request_id (its GlobalJobID) and hpc_annex_JOB_ID (the batch job's
id, as the pilot script reports it); the pilot's slots carry AnnexName and hpc_annex_request_id. `create`
refuses a name that has such a job ("You've already created an annex named ... To request more
resources, use 'htcondor annex add'"), and the job stays until an hour after the annex's lifetime (for
ever when the annex never came up), so a site's next annex is an `add`. `annex shutdown` reaches only
pilots that are up (through their master ads); a request still queued at the site is cancelled there.
"""
import getpass
import os
import shlex
import shutil
import subprocess
import time

import classad2
import htcondor2
from htcondor_codes import JobStatus, annex_start
from htcondor_cli.annex_validate import SYSTEM_TABLE

from snakemake_executor_plugin_htcannex.annex.ssh import Login, run_detached_output
from snakemake_executor_plugin_htcannex.sites.site import Site
from snakemake_executor_plugin_htcannex.units import format_duration_s

# ssh login, copying HTCondor's scripts, the pilot's set-up at the login host (download, unpack), sbatch.
CREATE_TIMEOUT_S = 900
SHUTDOWN_TIMEOUT_S = 120
# How long the pilots may take to leave after `htcondor annex shutdown` (3 s on the realsite harness).
SHUTDOWN_WAIT_S = 20
# The knob through HTCondor's configuration, which takes _CONDOR_ overrides from the environment.
OLD_CREATE = "_CONDOR_ANNEX_USE_OLD_CREATE"
REQUEST_ATTRIBUTES = ["ClusterId", "ProcId", "GlobalJobID", "hpc_annex_JOB_ID"]


class AnnexCommandFailed(RuntimeError):
    pass


def htcondor_command() -> str:
    found = shutil.which("htcondor")
    if found is None:
        raise AnnexCommandFailed("`htcondor`, HTCondor's command-line tool, is not on PATH; it is installed with "
                                 "HTCondor on an access point (put its bin/ on PATH)")
    return found


def _tail(output: str, lines: int = 12) -> str:
    return "\n".join(line for line in output.strip().splitlines()[-lines:])


class HtcondorCliBackend:
    def __init__(self, schedd=None, collector=None):
        self.schedd = schedd
        self.collector = collector
        self._logins_opened: dict[str, Login] = {}  # shared ssh connections this process opened

    def command(self, site: Site, verb: str = "create") -> list[str]:
        request = site.annex_request()  # refuses placeholders (project, login)
        argv = [
            "htcondor", "annex", verb, request.name, f"{request.queue}@{request.system}",
            "--nodes", str(request.nodes),
            "--lifetime", str(request.lifetime_s),
        ]
        optional = {
            "--project": request.project,
            "--login-name": request.login,
            "--gpus": request.gpus,
            "--gpu-type": request.gpu_type,
            "--cpus": request.cpus,  # None on whole-node queues, which refuse them
            "--mem_mb": request.mem_mb,
        }
        for flag, value in optional.items():
            if value is not None:
                argv += [flag, str(value)]
        return argv

    def describe(self, site: Site) -> str:
        return f"{OLD_CREATE}=true " + shlex.join(self.command(site))

    def _requests(self, name: str) -> list:
        """HTCondor's record of each request for annex `name` still in the queue."""
        return self.schedd.query(f"hpc_annex_name == {classad2.quote(name)} && JobStatus =!= {JobStatus.REMOVED:d}",
                                 projection=REQUEST_ATTRIBUTES)

    def create(self, site: Site) -> bool:
        verb = "add" if self._requests(site.annex_name) else "create"
        argv = self.command(site, verb)
        login = self._login(site)
        if login is not None:
            opened_before = login.master_open()
            try:
                login.check(site.name)  # raises where it would prompt with no one to answer
            finally:
                self._remember_if_opened(login, opened_before)
        try:
            result = run_detached_output([htcondor_command(), *argv[1:]], CREATE_TIMEOUT_S,
                                         env=dict(os.environ, **{OLD_CREATE: "true"}))
        except subprocess.TimeoutExpired:
            raise AnnexCommandFailed(f"`{shlex.join(argv)}` did not finish within {CREATE_TIMEOUT_S} s") from None
        if result.returncode != 0:
            raise AnnexCommandFailed(f"`{shlex.join(argv)}` exited with {result.returncode}:\n"
                                     f"{_tail(result.stdout)}")
        return True

    def withdraw(self, site: Site) -> str:
        """Shut the annex down where it is up (`htcondor annex shutdown`), cancel at the site (scancel) its batch
        jobs still there (queued, or a pilot the shutdown did not reach), and remove HTCondor's records of its
        requests, so that nothing of it is left."""
        name = site.annex_name
        requests = self._requests(name)
        said = []
        if self._slots(name):
            result = run_detached_output([htcondor_command(), "annex", "shutdown", name], SHUTDOWN_TIMEOUT_S)
            # It finds pilots by their master ads: one whose master has not advertised yet is not reached.
            deadline = time.time() + SHUTDOWN_WAIT_S
            while self._slots(name) and time.time() < deadline:
                time.sleep(1)
            if not self._slots(name):
                said.append(f"shut down (`htcondor annex shutdown {name}`)")
            elif result.returncode != 0:
                said.append(f"`htcondor annex shutdown {name}` exited with {result.returncode}: {_tail(result.stdout, 4)}")
        batch_jobs = [str(ad["hpc_annex_JOB_ID"]) for ad in requests if ad.get("hpc_annex_JOB_ID") is not None]
        # Never up (still queued at the site), or up and not reached by the shutdown: cancelled there.
        if batch_jobs and (not said or self._slots(name)):
            said.append(self._cancel_at_site(site, batch_jobs))
        if requests:
            self.schedd.act(htcondor2.JobAction.Remove, [f"{ad['ClusterId']}.{ad['ProcId']}" for ad in requests],
                            reason=f"htcannex: annex {name} is over")
        return "; ".join(said) or f"annex {name} had nothing up or queued"

    def _slots(self, name: str) -> list:
        return self.collector.query(htcondor2.AdTypes.Startd, constraint=f"AnnexName == {classad2.quote(name)}",
                                    projection=["Name"])

    def _cancel_at_site(self, site: Site, batch_jobs: list[str]) -> str:
        login = self._login(site)
        system = SYSTEM_TABLE[site.system.casefold()]
        by_hand = f"cancel batch job(s) {' '.join(batch_jobs)} at {system.pretty_name} yourself"
        if login is None or system.batch_system != "SLURM":
            return by_hand
        opened_before = login.master_open()
        try:
            listed = login.ssh("squeue", "--me", "-h", "-o", "%i")
            live = [job for job in batch_jobs if job in listed.stdout.split()] if listed.returncode == 0 else batch_jobs
            if not live:
                return f"its batch job(s) {' '.join(batch_jobs)} at {system.pretty_name} had ended"
            result = login.ssh("scancel", *live)
        except subprocess.TimeoutExpired:
            return f"ssh to {login.target} did not answer: {by_hand}"
        finally:
            self._remember_if_opened(login, opened_before)
        if result.returncode != 0:
            return f"scancel {' '.join(live)} at {login.target} failed ({_tail(result.stdout, 2)}): {by_hand}"
        return f"cancelled batch job(s) {' '.join(live)} at {system.pretty_name}"

    def _remember_if_opened(self, login: Login, opened_before: bool) -> None:
        """An ssh to the login host with ControlMaster auto leaves a shared connection behind for 5 minutes
        where none was open: this process's to close at the end (close_logins), unlike one the user opened."""
        if not opened_before and login.master_open():
            self._logins_opened[login.target] = login

    def close_logins(self) -> None:
        """Close the shared ssh connections this process opened (not one the user opened)."""
        for login in self._logins_opened.values():
            login.close_master()
        self._logins_opened.clear()

    @staticmethod
    def _login(site: Site):
        login = Login.of(site.system, site.login)
        return login if login.target is not None else None

    def manual_steps(self, site: Site) -> str:
        """A site in HTCondor's SYSTEM_TABLE that needs an interactive (two-factor) login: HTCondor
        25's self-service `htcondor annex create NAME`, whose setup tarball the user runs at the
        site (htcondor_cli/annex_create.py; README.annex-setup). Any other site (a cloud VM such as
        Jetstream2's): an execute point joining this pool that advertises the annex's name and
        starts only this user's jobs for it, as an annex pilot's configuration does
        (condor_scripts/annex/00-annex-pilot-base)."""
        name = site.annex_name
        if site.facts == "system-table":
            tarball = f"annex-{name}.tar"
            return (f"On this access point (the held jobs for it are already queued):\n"
                    f"    htcondor annex create {name}\n"
                    f"copy the {tarball} it writes to {site.system}, and there:\n"
                    f"    tar xf {tarball} && cd annex-{name} && ./annex-setup.sh\n"
                    f"then add your allocation and queue ({site.queue}, {site.nodes} node(s), at most "
                    f"{format_duration_s(site.lifetime_s)}) to the hpc.slurm it writes and `sbatch hpc.slurm`.")
        collector = htcondor2.param.get("COLLECTOR_HOST", "<this pool's central manager>")
        return (f"Start a machine at {site.name}{f' ({site.queue})' if site.queue else ''} with HTCondor 25 "
                f"installed, give it a token to join this pool (`condor_token_fetch` here, saved in its "
                f"tokens.d), and this configuration (e.g. /etc/condor/config.d/50-{name}.conf):\n"
                f"    use role:execute\n"
                f"    CONDOR_HOST = {collector}\n"
                f"    AnnexName = \"{name}\"\n"
                f"    STARTD_ATTRS = $(STARTD_ATTRS) AnnexName\n"
                f"    START = $(START) && {annex_start(getpass.getuser())}\n"
                f"then run condor_master there, and stop the machine after {format_duration_s(site.lifetime_s)} "
                f"(sites.{site.name}.lifetime).")

