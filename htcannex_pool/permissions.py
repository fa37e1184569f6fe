"""Whether a job's owner may write a directory on the access point.

HTCondor never runs a job, or writes its user log and outputs, as root: a schedd maps a root
submitter to another user (as /work/shared/realpool maps root to htcuser) or refuses it. So the
pool judges a directory by its permission bits for the job's Owner as for an unprivileged user,
even when the pool itself runs as root, where the kernel would let it write anywhere.
"""
import grp
import os
import pwd
import stat
from pathlib import Path


def writable_by(owner: str, directory: Path) -> bool:
    """Whether `owner` may create files in `directory` (or, where it does not exist yet, in the
    nearest existing directory above it, where it would be created)."""
    directory = Path(directory)
    while not directory.exists() and directory.parent != directory:
        directory = directory.parent
    try:
        user = pwd.getpwnam(owner)
    except KeyError:  # not a local account: all the pool can ask is the kernel
        return os.access(directory, os.W_OK)
    status = directory.stat()
    groups = {user.pw_gid, *(group.gr_gid for group in grp.getgrall() if owner in group.gr_mem)}
    if status.st_uid == user.pw_uid:
        bit = stat.S_IWUSR
    elif status.st_gid in groups:
        bit = stat.S_IWGRP
    else:
        bit = stat.S_IWOTH
    return bool(status.st_mode & bit)
