from lineage_helper import write

write(snakemake.output[0])
