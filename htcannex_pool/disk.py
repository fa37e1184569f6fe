"""Sizes on disk as HTCondor counts them: a directory by its files, symbolic links skipped
(Directory::GetDirectorySize), in KiB rounded up (submit_utils.cpp calc_image_size_kb); and as the
schedd stores them in a job ad, rounded up."""
import math
import os
from pathlib import Path

import classad2

# The schedd stores these rounded up to a quarter of their order of magnitude and keeps the value it was given as
# <name>_RAW (qmgmt.cpp SetAttribute; param_info.in SCHEDD_ROUND_ATTR_<name> = 25%): a 25.14.0 job with 1,468 KiB
# of executable and inputs had DiskUsage = 1500.
ROUNDING_PERCENT = 25


def bytes_below(directory: str) -> int:
    """The sizes of the files below `directory`, from the directory entries: 36 us for a no-op job's
    sandbox, where rglob's Path objects took 360 us (and followed symbolic links)."""
    total = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                total += bytes_below(entry.path)
            elif entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
    return total


def size_kib(path: Path) -> int:
    """A file's or a directory tree's size in KiB, rounded up; 0 for one that is not there."""
    if path.is_dir():
        return -(-bytes_below(str(path)) // 1024)
    return -(-path.stat().st_size // 1024) if path.is_file() else 0


def store_rounded(ad: classad2.ClassAd, name: str, kib: int):
    """Set a size attribute (DiskUsage, ExecutableSize) as the schedd stores it: rounded, and as given in _RAW."""
    ad[f"{name}_RAW"] = kib
    if kib:
        magnitude = int(math.log10(abs(kib) / 5) + 1)  # truncated toward zero, as the schedd's (int) cast
        step = 10 ** magnitude * ROUNDING_PERCENT / 100
        kib = int(math.ceil(kib / step) * step)
    ad[name] = kib
