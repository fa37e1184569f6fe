"""One training chunk in its own process, as a train_chunk job's training command runs it, timed
by phase (run by bench/chunking.py).

`python -m bench.chunk_job SPAWNED_AT SPEC_JSON` runs the workflow's scripts/train_chunk.py as
__main__ with the chunk's arguments (SPEC_JSON's argv). It prints one JSON line: "phases", the
wall seconds spent on interpreter start-up (SPAWNED_AT is when the parent started this process),
the script's imports, configure (threads, deterministic algorithms), data load, model build,
checkpoint load, checkpoint save, and the rest of train_chunk (training); and "cpu", the CPU
seconds of the same phases (start-up: the interpreter's own, up to this module's first line),
printed by the script's last call (protein_lm.runtime.end_process). The parent adds what is left
of the process's wall time and CPU (the script's last lines and the process's exit) from its own
rusage.
"""
import time

STARTED, STARTED_CPU = time.time(), time.process_time()

import gc  # noqa: E402  (after the clock: start-up is measured up to here)
import json  # noqa: E402
import runpy  # noqa: E402
import sys  # noqa: E402

# The entry point's own steps timed inside train_chunk; "training" is the rest of it.
IN_CHUNK = ("configure", "data", "model", "ckpt load", "ckpt save")


def _timing(phases: dict, name: str, function, clock=time.perf_counter):
    def timed(*args, **kwargs):
        started = clock()
        try:
            return function(*args, **kwargs)
        finally:
            phases[name] = phases.get(name, 0.0) + clock() - started

    return timed


def main(spawned_at: str, spec_json: str) -> None:
    spec = json.loads(spec_json)
    phases = {"startup": STARTED - float(spawned_at)}
    cpu = {"startup": STARTED_CPU}  # the same phases' CPU seconds
    began, began_cpu = time.perf_counter(), time.process_time()
    # As `python scripts/train_chunk.py ARGS`: the script's directory first on sys.path.
    sys.path[:0] = spec["search_path"]
    sys.argv = [spec["script"], *spec["argv"]]
    # The script's first line pauses garbage collection for torch's start-up; these imports come
    # before it here, so they run as it would have them run.
    gc.disable()
    from protein_lm import checkpoint, runtime, training

    # The phases are the entry point's own calls, timed where training.py looks them up;
    # train_chunk itself is wrapped before the script imports it.
    for module, function, phase in ((training, "configure", "configure"), (training, "load_splits", "data"),
                                    (training, "build_model", "model"), (checkpoint, "load", "ckpt load"),
                                    (checkpoint, "save", "ckpt save")):
        timed = _timing(cpu, phase, getattr(module, function), time.process_time)
        setattr(module, function, _timing(phases, phase, timed))
    entered = {}
    train_chunk, end_process = training.train_chunk, runtime.end_process

    def timed_train_chunk(job):
        entered["at"], entered["cpu"] = time.perf_counter(), time.process_time()
        return _timing(phases, "train_chunk", _timing(cpu, "train_chunk", train_chunk, time.process_time))(job)

    def reporting_end_process(code: int = 0):
        """The script's last call: print the phases, then end as the script would."""
        phases["imports"], cpu["imports"] = entered["at"] - began, entered["cpu"] - began_cpu
        for by_phase in (phases, cpu):
            by_phase["training"] = by_phase.pop("train_chunk") - sum(by_phase.get(name, 0.0) for name in IN_CHUNK)
        print(json.dumps({"phases": phases, "cpu": cpu}))
        end_process(code)

    training.train_chunk, runtime.end_process = timed_train_chunk, reporting_end_process
    runpy.run_path(spec["script"], run_name="__main__")


if __name__ == "__main__":
    main(*sys.argv[1:])
