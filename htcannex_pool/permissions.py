"""Whether a job's owner may write a directory on the access point.

HTCondor never runs a job, or writes its user log and outputs, as root: a schedd maps a root
submitter to another user (a personal pool run by root maps it to the user it runs jobs as) or refuses it. So the
pool judges a directory by its permission bits for the job's Owner as for an unprivileged user,
even when the pool itself runs as root, where the kernel would let it write anywhere.
"""
import grp
import os
import pwd
import stat
import time
from pathlib import Path
from typing import NamedTuple, Optional

# How long an owner's uid and groups are kept: HTCondor's passwd_cache keeps them
# PASSWD_CACHE_REFRESH seconds (param_info.in: 72000). Reading them (grp.getgrall() reads
# the whole group database) on every event-log write was a sixth of the daemon's time.
PASSWD_CACHE_REFRESH_S = 72000


class _Account(NamedTuple):
    uid: int
    groups: frozenset[int]
    looked_up: float


_accounts: dict[str, Optional[_Account]] = {}


def _account(owner: str) -> Optional[_Account]:
    """The owner's uid and groups (None: not a local account), cached as HTCondor caches them."""
    account = _accounts.get(owner)
    if account is not None and time.monotonic() - account.looked_up < PASSWD_CACHE_REFRESH_S:
        return account
    try:
        user = pwd.getpwnam(owner)
    except KeyError:
        _accounts.pop(owner, None)  # asked again next time: the account may be created meanwhile
        return None
    groups = frozenset({user.pw_gid, *(group.gr_gid for group in grp.getgrall() if owner in group.gr_mem)})
    account = _accounts[owner] = _Account(user.pw_uid, groups, time.monotonic())
    return account


def writable_by(owner: str, directory: Path) -> bool:
    """Whether `owner` may create files in `directory` (or, where it does not exist yet, in the
    nearest existing directory above it, where it would be created)."""
    directory = Path(directory)
    while not directory.exists() and directory.parent != directory:
        directory = directory.parent
    account = _account(owner)
    if account is None:  # not a local account: all the pool can ask is the kernel
        return os.access(directory, os.W_OK)
    status = directory.stat()
    if status.st_uid == account.uid:
        bit = stat.S_IWUSR
    elif status.st_gid in account.groups:
        bit = stat.S_IWGRP
    else:
        bit = stat.S_IWOTH
    return bool(status.st_mode & bit)
