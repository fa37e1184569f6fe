import os

from lineage_helper import write

write(snakemake.output[0], tmpdir_in_sandbox=os.path.realpath(snakemake.resources.tmpdir).startswith(
    os.path.realpath(os.environ["_CONDOR_SCRATCH_DIR"])))
