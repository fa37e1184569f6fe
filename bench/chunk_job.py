"""One training chunk in its own process, timed by phase (run by bench/chunking.py).

`python -m bench.chunk_job SPAWNED_AT SPEC_JSON` trains one chunk with the workflow's own
entry point (protein_lm.training.train_chunk, as scripts/train_chunk.py calls it) and prints
one JSON line: seconds spent on interpreter start-up (SPAWNED_AT is when the parent started
this process), imports, data load, checkpoint load, checkpoint save, and the rest (training).
"""
import time

STARTED = time.time()

import json  # noqa: E402  (after the clock: start-up is measured up to here)
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


def _timing(phases: dict, name: str, function):
    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            phases[name] = phases.get(name, 0.0) + time.perf_counter() - started

    return timed


def main(spawned_at: str, spec_json: str) -> None:
    spec = json.loads(spec_json)
    phases = {"start-up": STARTED - float(spawned_at)}
    began = time.perf_counter()
    sys.path.insert(0, spec["package_dir"])
    from protein_lm import checkpoint, training
    from protein_lm.config import TrainParams

    phases["imports"] = time.perf_counter() - began
    # The phases are the entry point's own calls, timed where training.py looks them up.
    training.load_splits = _timing(phases, "data load", training.load_splits)
    checkpoint.load = _timing(phases, "checkpoint load", checkpoint.load)
    checkpoint.save = _timing(phases, "checkpoint save", checkpoint.save)
    began = time.perf_counter()
    training.train_chunk(training.ChunkJob(
        run_id="bench", params=TrainParams.from_dict(spec["params"]), data=Path(spec["data"]),
        chunk=spec["chunk"], epochs_per_job=spec["epochs_per_job"], total_epochs=spec["total_epochs"],
        previous=Path(spec["previous"]) if spec["previous"] else None, output=Path(spec["output"]),
        self_checkpoint=training.SelfCheckpoint(Path(spec["output"] + ".self"), 0, False),
        threads=spec["threads"],
    ))
    in_chunk = time.perf_counter() - began
    phases["training"] = in_chunk - sum(phases.get(name, 0.0) for name in ("data load", "checkpoint load", "checkpoint save"))
    print(json.dumps(phases))


if __name__ == "__main__":
    main(*sys.argv[1:])
