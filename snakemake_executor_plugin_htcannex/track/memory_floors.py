"""The memory each job asks for at least, after one of its attempts was held for memory or killed
(waiting.HeldAndIdle.more_memory_next_time), kept in `.htcannex/memory-floors.json` by job signature
(description.job_signature: working directory, rule and outputs).

Kept on disk, not in the driver: a walk-away driver restarted between a memory hold and the next
attempt (a login node's reboot, `htcannex submit` after Ctrl-C) asks for the raised request, not the
rule's `mem_mb` again, which would be held or killed the same way. HTCondor's own memory retry
(`retry_request_memory*`) would keep it in the schedd, but acts on none of the ways an annex ends a job
over its memory (docs/operations.md). A floor only raises a request, and stays: the memory the job
needed once is what a rerun of it needs too.
"""
import json
import os
from pathlib import Path

from snakemake_executor_plugin_htcannex import paths


class MemoryFloors:
    def __init__(self, workdir: Path):
        self.path = paths.memory_floors(workdir)
        try:
            self._floors: dict[str, int] = json.loads(self.path.read_text())
        except (FileNotFoundError, ValueError):  # none yet, or a file cut short: start without
            self._floors = {}

    def get(self, signature: str) -> int | None:
        return self._floors.get(signature)

    def raise_to(self, signature: str, memory_mb: int) -> None:
        """The job asks for at least `memory_mb` from now on, in this run and the next."""
        if memory_mb <= self._floors.get(signature, 0):
            return
        self._floors[signature] = memory_mb
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".partial")
        partial.write_text(json.dumps(self._floors, indent=1, sort_keys=True))
        os.replace(partial, self.path)  # never a half-written file
