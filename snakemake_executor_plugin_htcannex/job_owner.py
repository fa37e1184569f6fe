"""The user our jobs run as on a schedd, and what that user can do on this machine.

HTCondor runs a job as its Owner, and the schedd, not the submitter, sets it: from the
submitter's authenticated identity (submit_utils.cpp leaves Owner undefined since 8.9.5;
qmgmt.cpp fills it in and never with root: "setting owner to root is not permitted").
Submitting as yourself, that is you. Submitting as root, it is whoever the schedd maps
root to: on a real 25.14.0 personal pool whose daemons run as `htcuser`, root's jobs were
htcuser's (Owner = "htcuser"), and a local-universe job ran as htcuser. So `htcannex
submit`, as root, asks the schedd (`ask_schedd`) and checks, as that user, the Python the
driver will run and the directories it will write, and gives it the directories it makes.
"""
import getpass
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import htcondor2

# A job that shows the Owner the schedd gives our jobs: local (no matchmaking), held (never
# runs), no log; removed as soon as its ad has been read.
PROBE = {"universe": "local", "executable": "/bin/true", "hold": "true", "batch_name": "htcannex-owner-probe"}


@dataclass(frozen=True)
class JobOwner:
    name: str

    @property
    def is_me(self) -> bool:
        return self.name == getpass.getuser()

    def run(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        """`argv` run as this user (by root: with the user's uid, gid and groups); OSError if it cannot start."""
        if self.is_me:
            return subprocess.run(argv, capture_output=True, text=True, **kwargs)
        entry = pwd.getpwnam(self.name)
        return subprocess.run(argv, capture_output=True, text=True, user=entry.pw_uid, group=entry.pw_gid,
                              extra_groups=os.getgrouplist(self.name, entry.pw_gid), **kwargs)

    def can_write(self, directory: Path) -> bool:
        """Whether this user may create files in `directory`."""
        if self.is_me:
            return os.access(directory, os.W_OK | os.X_OK)
        return self.run(["test", "-w", str(directory), "-a", "-x", str(directory)]).returncode == 0

    def give(self, path: Path) -> None:
        """Hand `path`, made here by root for this user's job, to this user."""
        if not self.is_me:
            shutil.chown(path, self.name, pwd.getpwnam(self.name).pw_gid)


def me() -> JobOwner:
    return JobOwner(getpass.getuser())


def ask_schedd(schedd) -> JobOwner:
    """Whose jobs the schedd makes ours: this user's, unless this is root (see the module's doc)."""
    if os.geteuid() != 0:
        return me()
    cluster = schedd.submit(htcondor2.Submit(PROBE)).cluster()
    try:
        [ad] = schedd.query(f"ClusterId == {cluster}", ["Owner"])
    finally:
        schedd.act(htcondor2.JobAction.Remove, f"{cluster}.0", "htcannex submit: asked whose jobs these are")
    return JobOwner(ad["Owner"])
