"""The training command of protein_lm's chunks (chunked_training's contract): the epochs of one
chunk (protein_lm.training), or of a whole run in one job (the unbroken baseline twin).

    python train_chunk.py --run UUID --chunk K --epochs-per-job E --total-epochs N --data TSV
        --resume-from CKPT|'' --write-to CKPT --self-checkpoint FILE --checkpoint-every-steps S
        [--checkpoint-every-minutes M] --threads T --params seed=1 d_model=32 ... [--inject-resume-bug NAME]

Chunk K trains from where its start state stopped (checkpoint K-1, or the run's seed when
--resume-from is empty) up to epoch K x E, so the twin's one job is chunk N/E from the seed.
Under HTCondor with checkpoint_exit_code set, a saved self-checkpoint ends the job with that
code (HTCondor keeps the file and restarts the job); anywhere else training goes on in-process.
"""
import gc

gc.disable()  # torch's start-up without collections, until protein_lm.runtime.configure

import argparse
import logging
import sys
from pathlib import Path

from protein_lm.config import TrainParams
from protein_lm.job_environment import checkpoint_exit_code, checkpoint_exit_marker
from protein_lm.runtime import end_process
from protein_lm.training import RESUME_BUGS, ChunkJob, Outcome, SelfCheckpoint, train_chunk


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True)
    for name in ("--chunk", "--epochs-per-job", "--total-epochs", "--checkpoint-every-steps", "--threads"):
        parser.add_argument(name, type=int, required=True)
    for name in ("--data", "--write-to", "--self-checkpoint"):
        parser.add_argument(name, type=Path, required=True)
    parser.add_argument("--checkpoint-every-minutes", type=float, default=0.0, help="also self-checkpoint after M minutes (0: never)")
    parser.add_argument("--resume-from", default="")
    parser.add_argument("--params", nargs="+", required=True, metavar="NAME=VALUE")
    parser.add_argument("--inject-resume-bug", choices=list(RESUME_BUGS), help="a negative control: this bug at the hop")
    return parser.parse_args(argv)


args = parse(sys.argv[1:])
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
exit_code = checkpoint_exit_code()
outcome = train_chunk(ChunkJob(
    run_id=args.run,
    params=TrainParams.from_dict(dict(item.split("=", 1) for item in args.params)),
    data=args.data,
    chunk=args.chunk,
    epochs_per_job=args.epochs_per_job,
    total_epochs=args.total_epochs,
    previous=Path(args.resume_from) if args.resume_from else None,
    output=args.write_to,
    self_checkpoint=SelfCheckpoint(args.self_checkpoint, args.checkpoint_every_steps, exit_code is not None,
                                   args.checkpoint_every_minutes),
    threads=args.threads,
    resume_bug=args.inject_resume_bug,
))
if outcome is Outcome.CHECKPOINTED:
    # Snakemake around this command (when the job runs one) exits 1 for any failure; the marker
    # tells the htcannex job wrapper to exit with the checkpoint code instead (docs/architecture.md).
    if marker := checkpoint_exit_marker():
        marker.write_text(f"{exit_code}\n")
    end_process(exit_code)
end_process()
