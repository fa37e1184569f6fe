# A chain of training chunks that hand their checkpoint on through OSDF: chunk k reads
# checkpoint k-1 from storage and writes checkpoint k under a new name.
CKPT = "osdf:///ospool/ap40/data/jdoe/protein_lm/run0/ckpt-{chunk}.pt"
LAST = int(config.get("chunks", 3))

wildcard_constraints:
    chunk=r"\d+",


rule all:
    input:
        storage.osdf(CKPT.format(chunk=LAST)),


def previous_checkpoint(wildcards):
    chunk = int(wildcards.chunk)
    return [] if chunk == 1 else [storage.osdf(CKPT.format(chunk=chunk - 1))]


rule train_chunk:
    input:
        previous_checkpoint,
    output:
        storage.osdf(CKPT),
    run:
        state = open(input[0]).read() if input else ""
        with open(output[0], "w") as checkpoint:
            checkpoint.write(state + f"chunk {wildcards.chunk}\n")
        with open("chunks-run.log", "a") as ran:
            ran.write(f"{wildcards.chunk}\n")
