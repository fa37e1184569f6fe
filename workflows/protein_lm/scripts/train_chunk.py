"""Rules train_chunk / train_baseline: one chunk of pretraining (protein_lm.training).

Under HTCondor with checkpoint_exit_code set, a saved self-checkpoint ends the job with that
code (HTCondor keeps the file and restarts the job); anywhere else training goes on in-process.
"""
import logging
import sys
from pathlib import Path

from protein_lm.config import TrainParams
from protein_lm.job_environment import checkpoint_exit_code, checkpoint_exit_marker
from protein_lm.runtime import skip_exit_collections
from protein_lm.training import ChunkJob, Outcome, SelfCheckpoint, train_chunk

snakemake = globals()["snakemake"]  # injected by Snakemake's script directive
logging.basicConfig(filename=snakemake.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
exit_code = checkpoint_exit_code()
previous = snakemake.input.get("previous")
outcome = train_chunk(ChunkJob(
    run_id=snakemake.wildcards.run,
    params=TrainParams.from_dict(snakemake.params.run),
    data=Path(snakemake.input.data),
    chunk=int(snakemake.wildcards.chunk),
    epochs_per_job=snakemake.params.epochs_per_job,
    total_epochs=snakemake.params.total_epochs,
    previous=Path(previous) if previous else None,
    output=Path(snakemake.output.checkpoint),
    self_checkpoint=SelfCheckpoint(Path(snakemake.params.self_checkpoint), snakemake.params.checkpoint_every_steps, exit_code is not None),
    threads=snakemake.threads,
))
skip_exit_collections()
if outcome is Outcome.CHECKPOINTED:
    # Snakemake around this script exits 1 for any failure; the marker tells the htcannex
    # job wrapper to exit with the checkpoint code instead (docs/architecture.md).
    if marker := checkpoint_exit_marker():
        marker.write_text(f"{exit_code}\n")
    sys.exit(exit_code)
