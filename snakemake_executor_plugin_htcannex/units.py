"""Human sizes and durations, read the way HTCondor and Snakemake read them.

Sizes follow HTCondor's `request_memory`: a bare number is MiB, and the
suffixes are binary whatever their spelling (K/KB/KiB = KiB, M/MB/MiB = MiB,
G/GB/GiB = GiB, T/TB/TiB = TiB). "4 GiB" and "4GB" are therefore the same
size; a bytes-only "B" suffix, a negative number or any other unit is refused.
Durations follow Snakemake's `runtime`: a bare number is minutes; the units
are s, m, h and d, and may be chained ("1h30m", "19h59m").

Every parser takes the `field` the value came from (e.g. `sites.expanse.memory`
or `rule train_chunk: resources.mem`) so that a refusal names it.
"""
import math
import re

MIB_PER_UNIT = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024**2}
SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}

_SIZE = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?:(?P<unit>[KMGT])(?:i?B)?)?", re.IGNORECASE)
_DURATION_PART = re.compile(r"(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[smhd])\s*", re.IGNORECASE)

SIZE_EXAMPLES = "128GB, 80G, 512MB, 1.5TB, 4 GiB, or a bare number of MiB such as 131072"
DURATION_EXAMPLES = "4h, 30m, 90s, 2d, 1h30m, or a bare number of minutes such as 240"


class UnitError(ValueError):
    """A size or duration that cannot be read; the message names the field."""


def _is_number(value: object) -> bool:
    # bool is an int subclass, and `memory: yes` must not mean 1 MiB.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_size_mib(value: object, *, field: str) -> int:
    """MiB in `value` (rounded up to a whole MiB, as HTCondor rounds requests)."""
    if _is_number(value):
        mib = float(value)
    elif isinstance(value, str) and (match := _SIZE.fullmatch(value.strip())):
        unit = (match["unit"] or "M").upper()
        mib = float(match["number"]) * MIB_PER_UNIT[unit]
    else:
        raise UnitError(
            f"{field}: {value!r} is not a size; write one of {SIZE_EXAMPLES} "
            "(K/M/G/T are binary units, as in HTCondor)"
        )
    if mib < 0 or not math.isfinite(mib):
        raise UnitError(f"{field}: {value!r} is not a size; a size cannot be negative")
    return math.ceil(mib)


def parse_duration_s(value: object, *, field: str) -> int:
    """Whole seconds in `value` (a bare number is minutes, as Snakemake's `runtime`)."""
    if _is_number(value):
        seconds = float(value) * 60
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text) * 60
        elif re.fullmatch(f"(?:{_DURATION_PART.pattern})+", text, re.IGNORECASE):
            seconds = sum(
                float(part["number"]) * SECONDS_PER_UNIT[part["unit"].lower()]
                for part in _DURATION_PART.finditer(text)
            )
        else:
            seconds = None
    else:
        seconds = None
    if seconds is None:
        raise UnitError(f"{field}: {value!r} is not a duration; write one of {DURATION_EXAMPLES}")
    if seconds < 0 or not math.isfinite(seconds):
        raise UnitError(f"{field}: {value!r} is not a duration; a duration cannot be negative")
    return math.ceil(seconds)


def format_size_mib(mib: int) -> str:
    """The shortest exact spelling of `mib` for messages ("92GB", "1536MB")."""
    for unit in ("T", "G"):
        if mib and mib % MIB_PER_UNIT[unit] == 0:
            return f"{mib // MIB_PER_UNIT[unit]}{unit}B"
    return f"{mib}MB"


def format_duration_s(seconds: int) -> str:
    """A compact spelling of `seconds` for messages ("19h59m", "40h", "90s")."""
    parts = []
    for unit in ("d", "h", "m", "s"):
        count, seconds = divmod(seconds, SECONDS_PER_UNIT[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
