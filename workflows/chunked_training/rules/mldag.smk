# An MLDAG experiment (config key `experiment`, or submit_template in the config): each chunk's
# command is the template's executable and arguments with the chunk's VARS, and the template goes
# to htcannex whole (resource htcannex_template, snakemake_executor_plugin_htcannex/submit_template.py),
# which fills {resource.*} for the site the chunk lands on. docs/mldag.md
import dataclasses
import shlex

import yaml
from snakemake.logging import logger

from chunked_training.experiment import MLDAG_VARS
from chunked_training.variables import VarsError
from snakemake_executor_plugin_htcannex import secrets
from snakemake_executor_plugin_htcannex.submit import template as submit_template


def _experiment_resources():
    """An MLDAG resources.yaml (config key experiment_resources): site -> {resource.*} values."""
    path = config.get("experiment_resources")
    if not path:
        return {}
    with open(path) as handle:
        return yaml.safe_load(handle) or {}


EXPERIMENT_RESOURCES = _experiment_resources() if TEMPLATE else {}


def chunk_template(run, chunk, variant="distributed"):
    """The template of one chunk of a run, or of its twin's job (EXPERIMENT.baseline_vars)."""
    file = os.path.abspath(EXPERIMENT_SOURCE) if config.get("experiment") else None
    chunk_vars = (EXPERIMENT.baseline_vars(RUNS[run], int(chunk) if TWIN_CHUNKED else None) if variant == "baseline"
                  else EXPERIMENT.chunk_vars(RUNS[run], int(chunk)))
    return submit_template.ChunkTemplate(TEMPLATE, chunk_vars, EXPERIMENT_RESOURCES, file)


def mldag_command(wildcards, output):
    """The template's executable and arguments for this chunk, then the chunk's VARS as its record;
    $(ResourceName) is the site the chunk runs at (submit_template.shell_command)."""
    chunk = chunk_template(wildcards.run, wildcards.chunk, wildcards.variant)
    chunk = dataclasses.replace(chunk, vars=dict(chunk.vars) | {"ResourceName": submit_template.SITE_TO_BE_PLACED})
    argv = submit_template.command(submit_template.parse(chunk, None, EXPERIMENT_SOURCE), EXPERIMENT_SOURCE)
    if any(submit_template.PLACEHOLDER.search(item) for item in argv):
        raise VarsError(f"{EXPERIMENT_SOURCE}: {{resource.*}} in executable or arguments is not known before the "
                        "chunk is placed; pass it as a submit macro or environment instead")
    record = submit_template.shell_command(["printf", "%s\\n", json.dumps(chunk.vars)])
    return f"{submit_template.shell_command(argv)} && {record} > {shlex.quote(output.checkpoint)}"


if TEMPLATE:
    # A $(var) nothing defines would be empty in every chunk: refused before anything runs.
    submit_template.undefined_macros(
        TEMPLATE, {**EXPERIMENT.chunk_vars(next(iter(RUNS.values())), 1), **dict.fromkeys(MLDAG_VARS)},
        EXPERIMENT_SOURCE)

if TEMPLATE and workflow.is_main_process:
    # Said once, where the workflow starts; the executor withholds them from every chunk.
    _names = submit_template.environment(submit_template.parse(chunk_template(next(iter(RUNS)), 1), None))[1]
    if _names:
        logger.warning(f"{EXPERIMENT_SOURCE}: " + secrets.withheld_warning(_names))
