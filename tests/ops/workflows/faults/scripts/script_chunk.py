"""A chunk as a script rule: its job runs the script htcannex prepared in .htcannex/scripts/."""
import sys
import time

time.sleep(snakemake.config.get("sleep", 0))
with open(snakemake.output[0], "w") as out:
    out.write(f"script run {snakemake.wildcards.run}\n")
sys.exit(snakemake.config.get("exit_code", 0))  # a chunk that fails after writing its output
