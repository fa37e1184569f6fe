"""Several jobs' submit descriptions as one submit: one cluster, one proc per job.

Each `schedd.submit` is a queue-management transaction (a connection, several round trips on a
real access point) and a RESCHEDULE; a sweep hands the submit thread tens of jobs at once. Those
that can share a cluster go as one `schedd.submit(template, itemdata=...)`: a key with the same
value in every description is written once, a key that differs reads a per-item variable
(`$(htcannex_item0)`, ...) that each item sets, as condor_submit's `queue ... from (...)`.

A description shares a cluster only where each proc gets exactly what it would alone:
- the same keys and the same universe (condor_submit reads the universe for a cluster's first
  proc only: submit_utils.cpp, make_job_ad);
- no macro that names the proc (`$(Process)`, `$(Row)`, ...): alone it is proc 0 of its cluster;
- each differing value is read back unchanged from an item line (`carried`). An item is
  substituted whole and its expansion rescanned, as the value in place is (config.cpp,
  expand_macro), so `$` written by submit_language.literal survives as it is.
"""
import re
from collections.abc import Sequence

import htcondor2

from snakemake_executor_plugin_htcannex.submit_language import CONTROL_CHARACTERS

ITEM_VARIABLE = "htcannex_item{}"
# The macros condor_submit gives a different value in each proc of a cluster (submit_utils.cpp,
# SubmitMacroDefaults and make_job_ad), in any form: $(Name), $INT(Name), $(Name:default), $EVAL(...).
PER_PROC_MACRO = re.compile(r"\$[A-Za-z]*\([^)]*\b(?:Process|ProcId|Row|Step|Item|ItemIndex|JobId|Node)\b",
                            re.IGNORECASE)


def carried(value: str) -> bool:
    """Whether an item line gives `value` back unchanged (submit_utils.cpp, load_inline_q_foreach_items and
    split_item; config.cpp, getline_implementation): items are trimmed, one line each, split at \\x1F, and a
    line is skipped when empty or starting with `#`, ends the items at `)`, continues after a trailing `\\`."""
    return (value == value.strip() != "" and not CONTROL_CHARACTERS.search(value)
            and not value.startswith(("#", ")")) and not value.endswith("\\"))


def groups(descriptions: Sequence[htcondor2.Submit]) -> list[list[int]]:
    """The descriptions (by index) that can share a cluster, in groups in the order of each group's first;
    a description that cannot is a group of its own."""
    rows = [dict(description.items()) for description in descriptions]
    alike: dict[object, list[int]] = {}
    for index, row in enumerate(rows):
        alone = any(PER_PROC_MACRO.search(value) for value in row.values())
        alike.setdefault(index if alone else (frozenset(row), row.get("universe")), []).append(index)
    found = []
    for members in alike.values():
        differing = _differing([rows[index] for index in members])
        # Without those whose differing value no item carries, the rest differ in fewer keys: all carried.
        # Descriptions alike in every value would give items without a variable, which queue nothing.
        uncarried = [index for index in members
                     if not differing or not all(carried(rows[index][key]) for key in differing)]
        found += [[index] for index in uncarried]
        if shareable := [index for index in members if index not in uncarried]:
            found.append(shareable)
    return sorted(found)


def shared(descriptions: Sequence[htcondor2.Submit]) -> tuple[htcondor2.Submit, list[dict[str, str]]]:
    """The one submit for the descriptions of one group: (template, itemdata)."""
    rows = [dict(description.items()) for description in descriptions]
    differing = _differing(rows)
    variables = {key: ITEM_VARIABLE.format(index) for index, key in enumerate(differing)}
    template = {key: f"$({variables[key]})" if key in variables else value for key, value in rows[0].items()}
    return htcondor2.Submit(template), [{variables[key]: row[key] for key in differing} for row in rows]


def _differing(rows: list[dict[str, str]]) -> list[str]:
    return [key for key, value in rows[0].items() if any(row[key] != value for row in rows)]


class ProcOfCluster:
    """One job of a shared submit, as the calls on `schedd.submit`'s answer that the executor makes name it."""

    def __init__(self, cluster: int, proc: int):
        self._cluster, self._proc = cluster, proc

    def cluster(self) -> int:
        return self._cluster

    def first_proc(self) -> int:
        return self._proc
