"""The realsite harness (start.sh, stop.sh) as the tests see it: commands run as the submitter, and what
is left at the site."""
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from htcondor_codes import HEARD_FROM_LATELY

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parents[1]
PROFILE = HERE / "profile"
NEEDED = {"condor_master": "an installed HTCondor 25 with its sbin/ on PATH",
          "slurmctld": "Debian's slurm-wlm", "slurmd": "Debian's slurm-wlm", "munged": "Debian's munge",
          "sshd": "Debian's openssh-server"}


@dataclass
class Realsite:
    state: Path
    user: str

    def run(self, *argv, cwd=None, timeout=600, check=True) -> subprocess.CompletedProcess:
        """Run a command as the submitter, with the access point's configuration."""
        result = subprocess.run([str(self.state / "as-user"), *map(str, argv)], cwd=cwd, capture_output=True,
                                text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(map(str, argv))} exited {result.returncode}:\n"
                                 f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
        return result

    def workdir(self, source: Path | None = None) -> Path:
        """A fresh working directory the submitter owns (a copy of `source`, if given)."""
        base = self.state / "work"
        base.mkdir(exist_ok=True)
        directory = Path(tempfile.mkdtemp(prefix="run-", dir=base))
        if source is not None:
            shutil.copytree(source, directory, dirs_exist_ok=True)
        self.own(base)
        return self.own(directory)

    def own(self, directory: Path) -> Path:
        """Give `directory` and everything in it to the submitter."""
        account = pwd.getpwnam(self.user)
        for path in [directory, *directory.rglob("*")]:
            os.chown(path, account.pw_uid, account.pw_gid)
        return directory

    def slurm_jobs(self) -> list[str]:
        """Slurm's queue: 'id partition state name' per job."""
        env = dict(os.environ, SLURM_CONF=str(self.state / "slurm" / "slurm.conf"))
        listed = subprocess.run(["squeue", "-h", "-o", "%i %P %T %j"], capture_output=True, text=True, env=env)
        return listed.stdout.split("\n")[:-1]

    def annex_slots(self) -> list[str]:
        """The slots of live pilots (not the lingering ads of one killed outright: htcondor_codes.HEARD_FROM_LATELY)."""
        shown = self.run("condor_status", "-constraint", f"AnnexName isnt undefined && {HEARD_FROM_LATELY}",
                         "-af", "Name", "AnnexName")
        return shown.stdout.split("\n")[:-1]

    def ssh_masters(self) -> list[Path]:
        return [socket for socket in (self.state / "ctl").glob("master-*") if socket.is_socket()]

    def close_ssh_masters(self) -> None:
        """Close the shared ssh connections left open (by an earlier test, or by hand)."""
        for socket in self.ssh_masters():
            self.run("ssh", "-o", f"ControlPath={socket}", "-O", "exit", "localhost", check=False)

    def wait_until_nothing_is_left(self, timeout_s: float = 120) -> None:
        deadline = time.time() + timeout_s
        while self.slurm_jobs() or self.annex_slots() or self.ssh_masters():
            assert time.time() < deadline, (f"left after {timeout_s:g} s: Slurm {self.slurm_jobs()}, "
                                            f"slots {self.annex_slots()}, ssh masters {self.ssh_masters()}")
            time.sleep(2)
