"""The workflows htcannex ships: inside the installed package (the wheel puts workflows/NAME under
it), or at the root of a source checkout. `htcannex experiment` runs chunked_training from here,
and a workflow of your own uses it as a module:

    from snakemake_executor_plugin_htcannex.bundled import snakefile

    module chunked_training:
        snakefile: snakefile("chunked_training")
        config: config
"""
from pathlib import Path

WORKFLOWS = ("chunked_training",)


def workflow(name: str) -> Path:
    """The directory of the bundled workflow `name`."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "workflows" / name, here.parent / "workflows" / name):
        if (candidate / "Snakefile").is_file():
            return candidate
    raise FileNotFoundError(f"no workflow {name} in {here} or beside it; reinstall htcannex")


def snakefile(name: str) -> str:
    """The Snakefile of the bundled workflow `name`, as Snakemake's `module ...: snakefile:` takes it."""
    return str(workflow(name) / "Snakefile")
