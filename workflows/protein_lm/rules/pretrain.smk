rule train_chunk:
    """The epochs of one chunk: reads checkpoint k-1, writes checkpoint k. The htcannex
    profile rotates this rule between sites by its wildcards run and chunk."""
    input:
        unpack(previous_checkpoint),
        data=SIMULATED,
    output:
        **checkpoint_files(CHECKPOINT),
    wildcard_constraints:
        variant="distributed",
    params:
        run=run_params,
        epochs_per_job=config["pretrain"]["epochs_per_job"],
        total_epochs=CHUNKS * config["pretrain"]["epochs_per_job"],
        checkpoint_every_steps=config["pretrain"]["checkpoint_every_steps"],
        self_checkpoint=self_checkpoint_name,
    threads: config["pretrain"]["threads"]
    resources:
        mem_mb=config["pretrain"]["mem_mb"],
        runtime=config["pretrain"]["runtime"],
        htcannex_submit=self_checkpoint_submit,
    log:
        "results/logs/train/{variant}/{run}/chunk-{chunk}.log",
    script:
        "../scripts/train_chunk.py"


# The same run, same chunks, same code; the profile pins this rule to one site.
use rule train_chunk as train_baseline with:
    wildcard_constraints:
        variant="baseline",
