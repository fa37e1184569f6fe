"""Chunking cost end to end: the protein_lm workflow's chain of train_chunk jobs through
Snakemake, the htcannex executor and the embedded pool, N chunks vs one chunk at equal epochs.

Side by side in one run, each variant in a fresh copy of the workflow directory with its own
embedded pool (default slots; the local profile creates the annexes it rotates over):
`snakemake --executor htcannex --profile profiles/local --omit-from train_baseline
evaluate_chunk finetune` (the distributed run's train_chunk jobs only) with one seed,
E epochs as N chunks of E/N or as one chunk of E, self-checkpointing off (it restarts a job
every k steps in both variants alike). The data is made once beforehand (rule make_data,
local executor) and copied into each variant, so only the training chain is timed. Data size
and chunking come from the chunking benchmark's options (--chunking-epochs, --chunking-chunks,
--chunking-variants, --chunking-seconds).

Per chunk job, from the HTCondor event log (1 s resolution), the checkpoint's own record
(segment start and end, epoch wall times) and Snakemake's log (1 s resolution):
submit -> execute (queue, annex creation), execute -> training starts (the job's Snakemake
start-up, input transfer, the script's imports and set-up, checkpoint load), training,
training ends -> terminate (checkpoint save, the script's exit, the job's Snakemake, output
transfer), terminate -> Snakemake sees it finish (status polls), and finish -> the next
chunk's submit (Snakemake scheduling and the executor's submit). And each chunk job's CPU as the
pool's starter measured it (RemoteUserCpu + RemoteSysCpu: the job's whole process tree, its own
Snakemake included): the N chunks' sum less one job's is the CPU an extra chunk costs end to end.
"""
import shutil
import statistics
import tempfile
from pathlib import Path

import htcondor2
import yaml
from snakemake_executor_plugin_htcannex.track.event_log import NEVER_WAIT

from . import snakemake_log
from .chunking import WORKFLOW, print_ratio, sized_config
from .common import REPO, SNAKEMAKE, bench_env, header, load, run_timed, spread

STEPS = ("queue", "to training", "training", "after training", "to finished", "to next submit")
JOB_CPU = "job CPU"  # per chunk job, from the pool's history


def add_arguments(parser) -> None:
    """Sizes come from the chunking benchmark's options."""


def run(args) -> None:
    epochs, chunks = args.chunking_epochs, args.chunking_chunks
    # A short path: the pool daemon's Unix socket path is limited to ~100 characters.
    with tempfile.TemporaryDirectory(prefix="htcannex-e2e-") as scratch:
        scratch = Path(scratch)
        config = sized_config(args, scratch)
        header(f"chunking end to end (Snakemake, htcannex, embedded pool): {epochs} epochs in {chunks} chunks "
               f"vs one chunk, {config['data']['n_variants']} variants, {args.repeat} repeats")
        template = _workflow_with_data(scratch / "template", config["data"])
        variants = {"one job": (1, epochs), f"{chunks} chunks": (chunks, epochs // chunks)}
        walls = {name: [] for name in variants}
        cpus = {name: [] for name in variants}  # CPU of all a repeat's chunk jobs together
        steps = {name: {step: [] for step in (*STEPS, JOB_CPU)} for name in variants}
        for repeat in range(args.repeat):
            for name, (n, epochs_per_job) in variants.items():
                workdir = scratch / f"{repeat}-{n}"
                shutil.copytree(template, workdir, symlinks=True)
                wall, per_job = _run_chain(workdir, scratch / f"p{repeat}-{n}", n, epochs_per_job)
                walls[name].append(wall)
                cpus[name].append(sum(job[JOB_CPU] for job in per_job))
                for job in per_job:
                    for step, seconds in job.items():
                        steps[name][step].append(seconds)
                print(f"   repeat {repeat + 1} {name:10} {wall:7.1f} s, chunk jobs' CPU {cpus[name][-1]:.1f} s  ({load()})",
                      flush=True)
    one, split = (statistics.median(values) for values in walls.values())
    print("   median [min-max] of repeats:  snakemake wall s   chunk jobs' CPU s")
    for name in walls:
        print(f"     {name:10} {spread(walls[name]):>22} {spread(cpus[name]):>22}")
    print_ratio(walls, statistics.median(steps[f"{chunks} chunks"]["training"]))
    print("   per chunk job, median s: " + " ".join(f"{step:>14}" for step in (*STEPS, JOB_CPU)))
    for name, by_step in steps.items():
        print(f"     {name:23}" + " ".join(f"{statistics.median(by_step[step]) if by_step[step] else 0:14.1f}"
                                       for step in (*STEPS, JOB_CPU)))
    extra = (split - one) / (chunks - 1) if chunks > 1 else 0.0
    extra_cpu = (statistics.median(cpus[f"{chunks} chunks"]) - statistics.median(cpus["one job"])) / max(chunks - 1, 1)
    print(f"   one extra chunk costs {extra:.1f} s of wall time and {extra_cpu:.2f} s of its jobs' CPU end to end "
          "(differences of the medians)")


def _workflow_with_data(directory: Path, data: dict) -> Path:
    """A copy of the workflow with its data made (local executor), for every variant to copy; the
    chunked_training rules it includes go next to it, where every copy finds them."""
    ignore = shutil.ignore_patterns("__pycache__", "results", ".snakemake")
    shutil.copytree(WORKFLOW, directory, ignore=ignore)
    shutil.copytree(WORKFLOW.parent / "chunked_training", directory.parent / "chunked_training", ignore=ignore)
    (directory / "data.yaml").write_text(yaml.safe_dump({"data": data}))
    run_timed([SNAKEMAKE, "--cores", "1", "--configfile", "data.yaml", "--until", "make_data"], directory, bench_env())
    return directory


def _run_chain(workdir: Path, spool: Path, chunks: int, epochs_per_job: int) -> tuple[float, list[dict]]:
    """One training chain through the executor on a fresh pool; its wall time and per-job steps."""
    from htcannex_pool import Pool

    (workdir / "bench.yaml").write_text(yaml.safe_dump({
        "sweep": {"seed": {"list": [1]}},
        "pretrain": {"chunks": chunks, "epochs_per_job": epochs_per_job, "checkpoint_every_steps": 0},
    }))
    pool = Pool(spool)
    pool.ensure_running()
    env = {**bench_env(), "HTCANNEX_POOL_DIR": str(pool.spool_dir)}
    try:
        timed = run_timed(
            [SNAKEMAKE, "--executor", "htcannex", "--profile", str(REPO / "profiles" / "local"),
             "--configfile", "data.yaml", "bench.yaml",
             # Not `--until train_chunk`: with OSDF checkpoints Snakemake 9.27 stops after chunk 1
             # with "BUG: Out of jobs ready to be started, but not all files built yet".
             "--omit-from", "train_baseline", "evaluate_chunk", "finetune"], workdir, env)
        finished = pool.schedd().history(projection=["ClusterId", "ProcId", "RemoteUserCpu", "RemoteSysCpu"])
    finally:
        pool.stop()
    cpu = {f"{ad['ClusterId']}.{ad['ProcId']}": ad["RemoteUserCpu"] + ad["RemoteSysCpu"] for ad in finished}
    return timed.wall_s, _job_steps(workdir, pool.origin_dir, snakemake_log.parse(timed.output), chunks, cpu)


def _job_steps(workdir: Path, origin: Path, jobs: dict, chunks: int, cpu: dict) -> list[dict]:
    """Where each chunk job's time went, in chunk order, and its CPU (`cpu`: by job id)."""
    from protein_lm import checkpoint

    events = {}
    for event in htcondor2.JobEventLog(str(workdir / ".htcannex" / "jobs.log")).events(stop_after=NEVER_WAIT):
        events.setdefault(f"{event.cluster}.{event.proc}", {})[event.type] = event.timestamp
    (final,) = origin.rglob(f"distributed-*-chunk-{chunks}.pt")
    state = checkpoint.load(final)
    trained = [job for job in sorted(jobs.values(), key=lambda job: job.issued) if job.rule == "train_chunk"]
    if len(trained) != chunks or len(state["segments"]) != chunks:
        raise RuntimeError(f"{workdir}: expected {chunks} train_chunk jobs of one segment each, found "
                           f"{len(trained)} jobs and {len(state['segments'])} segments")
    steps = []
    for index, (job, segment) in enumerate(zip(trained, state["segments"])):
        times = events[job.condor_id]
        executed, terminated = times[htcondor2.JobEventType.EXECUTE], times[htcondor2.JobEventType.JOB_TERMINATED]
        training = sum(epoch["wall_s"] for epoch in state["history"] if epoch["chunk"] == segment["chunk"])
        following = trained[index + 1] if index + 1 < len(trained) else None
        steps.append({
            "queue": executed - times[htcondor2.JobEventType.SUBMIT],
            "to training": segment["started"] - executed,
            "training": training,
            "after training": terminated - segment["started"] - training,
            "to finished": job.finished - terminated,
            **({"to next submit": events[following.condor_id][htcondor2.JobEventType.SUBMIT] - job.finished}
               if following else {}),
            JOB_CPU: cpu[job.condor_id],
        })
    return steps
