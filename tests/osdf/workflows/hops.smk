# Training chunks that hop between annexes and hand their checkpoints on through OSDF.
# Rule train_chunk has the run and chunk wildcards the local profile rotates by.
CKPT = "osdf:///ospool/ap40/data/jdoe/protein_lm/run{run}/ckpt-{chunk}.pt"
CHUNKS = int(config.get("chunks", 3))

wildcard_constraints:
    chunk=r"\d+",


rule all:
    input:
        storage.osdf(CKPT.format(run=0, chunk=CHUNKS)),


def previous_checkpoint(wildcards):
    chunk = int(wildcards.chunk)
    if chunk == 1:
        return []
    return [storage.osdf(CKPT.format(run=wildcards.run, chunk=chunk - 1))]


rule train_chunk:
    input:
        previous_checkpoint,
    output:
        storage.osdf(CKPT),
    threads: 1
    resources:
        mem_mb=600,
        runtime=10,
    shell:
        "echo chunk {wildcards.chunk} runs >&2; (cat {input} /dev/null; echo chunk {wildcards.chunk}) > {output}"
