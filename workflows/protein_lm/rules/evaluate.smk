# Validation after each chunk of a distributed run and after its twin's one job.
EVALUATED_CHUNKS = {"distributed": list(range(1, CHUNKS + 1)), "baseline": [CHUNKS]}


def evaluations(variant, run):
    return [f"results/eval/{variant}/{run}/chunk-{chunk}.json" for chunk in EVALUATED_CHUNKS[variant]]


rule evaluate_chunk:
    """Validation loss and Pearson r per score term after chunk k."""
    input:
        **checkpoint_files(CHECKPOINT),
        data=SIMULATED,
    output:
        "results/eval/{variant}/{run}/chunk-{chunk}.json",
    threads: 1
    resources:
        # The chunk's model and torch, as its training job: peaks of 517-585 MB here, over the
        # profiles' 512 MB default since jobs run without Snakemake's 256 MB on top (job_spec.py).
        mem_mb=config["pretrain"]["mem_mb"],
    log:
        "results/logs/evaluate/{variant}/{run}/chunk-{chunk}.log",
    script:
        "../scripts/evaluate_chunk.py"


rule finetune:
    """METL's second stage: the pretrained encoder, a new head, the small experimental set;
    Spearman rho on its held-out split."""
    input:
        unpack(lambda wildcards: final_checkpoint(wildcards.variant, wildcards.run)),
        data=EXPERIMENTAL,
    output:
        "results/finetune/{variant}/{run}.json",
    params:
        finetune=config["finetune"],
    threads: config["finetune"]["threads"]
    resources:
        mem_mb=config["finetune"]["mem_mb"],
    log:
        "results/logs/finetune/{variant}/{run}.log",
    script:
        "../scripts/finetune.py"
