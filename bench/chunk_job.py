"""One training chunk in its own process, timed by phase (run by bench/chunking.py).

`python -m bench.chunk_job SPAWNED_AT SPEC_JSON` trains one chunk with the workflow's own
entry point (protein_lm.training.train_chunk, as scripts/train_chunk.py calls it) and prints
one JSON line: seconds spent on interpreter start-up (SPAWNED_AT is when the parent started
this process), imports, configure (threads, deterministic algorithms), data load, model
build, checkpoint load, checkpoint save, and the rest of train_chunk (training). The parent adds what is left of the process's wall time
(interpreter exit: torch's teardown).
"""
import time

STARTED = time.time()

import json  # noqa: E402  (after the clock: start-up is measured up to here)
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


# The entry point's own steps timed inside train_chunk; "training" is the rest of it.
IN_CHUNK = ("configure", "data", "model", "ckpt load", "ckpt save")


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
    phases = {"startup": STARTED - float(spawned_at)}
    began = time.perf_counter()
    sys.path.insert(0, spec["package_dir"])
    from protein_lm import checkpoint, training
    from protein_lm.config import TrainParams

    phases["imports"] = time.perf_counter() - began
    # The phases are the entry point's own calls, timed where training.py looks them up.
    # configure: threads and torch.use_deterministic_algorithms, which imports torch._inductor.
    training.configure = _timing(phases, "configure", training.configure)
    training.load_splits = _timing(phases, "data", training.load_splits)
    training.build_model = _timing(phases, "model", training.build_model)
    checkpoint.load = _timing(phases, "ckpt load", checkpoint.load)
    checkpoint.save = _timing(phases, "ckpt save", checkpoint.save)
    began = time.perf_counter()
    training.train_chunk(training.ChunkJob(
        run_id="bench", params=TrainParams.from_dict(spec["params"]), data=Path(spec["data"]),
        chunk=spec["chunk"], epochs_per_job=spec["epochs_per_job"], total_epochs=spec["total_epochs"],
        previous=Path(spec["previous"]) if spec["previous"] else None, output=Path(spec["output"]),
        self_checkpoint=training.SelfCheckpoint(Path(spec["output"] + ".self"), 0, False),
        threads=spec["threads"],
    ))
    in_chunk = time.perf_counter() - began
    phases["training"] = in_chunk - sum(phases.get(name, 0.0) for name in IN_CHUNK)
    print(json.dumps(phases))


if __name__ == "__main__":
    main(*sys.argv[1:])
