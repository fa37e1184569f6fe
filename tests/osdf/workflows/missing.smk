rule all:
    input:
        storage.osdf("osdf:///ospool/ap40/data/jdoe/protein_lm/never-written.pt"),
