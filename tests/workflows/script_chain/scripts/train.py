"""One chunk: the previous checkpoint's lines, then this chunk's."""
from pathlib import Path

lines = Path(snakemake.input.previous[0]).read_text() if snakemake.input.previous else ""
Path(snakemake.output[0]).write_text(lines + f"chunk {snakemake.wildcards.chunk}\n")
