"""Sizes in submit commands, read as condor_submit reads them.

`request_memory` without a unit is MiB and `request_disk` without a unit is
KiB (HTCondor's historical defaults, which surprise people: 1000 = 1 GB of
memory but only 1 MB of disk). Units K/KB, M/MB, G/GB, T/TB are binary
multiples, case-insensitive; fractions round up, as condor_submit does.
"""
import math
import re

_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]B?)?\s*$", re.IGNORECASE)
_KIB_PER_UNIT = {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}


class SizeError(ValueError):
    """A size that condor_submit would refuse."""


def _to_kib(command: str, text: str, default_unit: str) -> float:
    found = _SIZE.match(str(text))
    if not found:
        raise SizeError(
            f"{command} = {text} is invalid: expected a non-negative number with an optional "
            f"unit K, KB, M, MB, G, GB, T or TB (e.g. {command} = 2GB)"
        )
    number, unit = found.groups()
    return float(number) * _KIB_PER_UNIT[(unit or default_unit)[0].upper()]


def memory_mib(command: str, text: str) -> int:
    """`request_memory`-style value -> MiB (no unit means MiB)."""
    return math.ceil(_to_kib(command, text, "M") / 1024)


def disk_kib(command: str, text: str) -> int:
    """`request_disk`-style value -> KiB (no unit means KiB)."""
    return math.ceil(_to_kib(command, text, "K"))
