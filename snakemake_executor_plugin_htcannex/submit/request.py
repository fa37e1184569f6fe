"""A job's resources as the typed request that placement judges and the submit description asks
for, made once per job: Snakemake's standard resources (and htcannex's GPU ones) in HTCondor's
units (MiB, seconds), its JobDurationCategory, and for an MLDAG chunk, whose request depends on the
site, each site's verdict on its template's request_* (template.admission).

The run judges the request a job submits (`job_request`), and placement's `Decision.request` is
that request as the chosen site admits it: build_submit takes it as it is. The dry run's plan does
not know yet which jobs run Snakemake in the job: it judges every job as one that does
(`plan_request`: with room for that Snakemake), which asks for at least as much.
"""
from collections.abc import Mapping

from snakemake.common.tbdstring import TBDString

from snakemake_executor_plugin_htcannex.sites.placement import Request
from snakemake_executor_plugin_htcannex.sites.site import ResourceRequest
from snakemake_executor_plugin_htcannex.submit import template
from snakemake_executor_plugin_htcannex.submit_language import GPU_MODEL, SubmitValueError, ValueChecker
from snakemake_executor_plugin_htcannex.units import UnitError, format_duration_s, parse_duration_s, parse_size_mib

# A job runs a whole Snakemake process (~150 MB resident) besides the rule's
# command, and HTCondor enforces request_memory on both together: a rule's
# mem_mb gets this much on top, and a job without mem_mb/disk_mb gets
# Snakemake's own "full" defaults instead of the pool's (128 MB on many pools).
SPAWNED_SNAKEMAKE_MB = 256
SPAWNED_SNAKEMAKE_DEFAULTS = {"mem_mb": 1000, "disk_mb": 1000}
MEDIUM_LIMIT_S = 20 * 3600  # OSPool's JobDurationCategory limits
LONG_LIMIT_S = 40 * 3600


def job_request(rule: str, resources: Mapping[str, object], threads: int) -> Request:
    """What placement judges the job by and its submit description asks for. Raises SubmitValueError
    for a resource that is not a valid request, or a runtime no JobDurationCategory allows. A dry
    run has no value yet for a resource computed from input files (Snakemake's <TBD>): it is not
    judged."""
    known = {name: value for name, value in resources.items() if not isinstance(value, TBDString)}
    request = parse(rule, known, threads)
    chunk = template.of(known)
    return template.admission(chunk, request, rule) if chunk else request


def plan_request(rule: str, resources: Mapping[str, object], threads: int) -> Request:
    """The dry run's request for a job: as a job that runs its own Snakemake asks (a plain shell rule
    run directly asks for less, and a site that admits this admits that)."""
    return job_request(rule, with_room_for_snakemake(dict(resources)), threads)


def parse(rule: str, resources: Mapping[str, object], threads: int) -> ResourceRequest:
    """Snakemake's standard resources (and htcannex's GPU ones) in HTCondor's units."""

    def size(*names: str) -> int | None:
        for name in names:
            if resources.get(name) is not None:
                return _unit(rule, f"resources.{name}", resources[name], parse_size_mib)
        return None

    runtime = resources.get("runtime")
    gpu_model = resources.get("gpu_model")
    if gpu_model is not None and not GPU_MODEL.fullmatch(ValueChecker(rule).text("resources.gpu_model", gpu_model)):
        raise SubmitValueError(rule, "resources.gpu_model", gpu_model,
                               "a GPU model is letters, digits, spaces, '-' and '_' (e.g. A100, H200, RTX 2080)")
    capability = resources.get("gpu_capability")
    try:
        capability = float(capability) if capability is not None else None
    except (TypeError, ValueError):
        raise SubmitValueError(rule, "resources.gpu_capability", capability,
                               "write the compute capability as a string, e.g. \"8.0\"") from None
    runtime_s = _unit(rule, "resources.runtime", runtime, parse_duration_s) if runtime is not None else None
    return ResourceRequest(
        cpus=_count(rule, "threads", threads, minimum=1),
        # mem_mb is taken as MiB, HTCondor's request_memory unit (as the SLURM plugin passes it to --mem).
        memory_mb=size("mem_mb", "mem_mib", "mem"),
        disk_mb=size("disk_mb", "disk_mib", "disk"),
        gpus=_count(rule, "resources.gpu", resources.get("gpu", 0), minimum=0),
        gpu_model=str(gpu_model) if gpu_model is not None else None,
        gpu_memory_mb=size("gpu_memory"),
        gpu_capability=capability,
        runtime_s=runtime_s,
        duration_category=duration_category(runtime_s, rule) if runtime_s is not None else None,
    )


def duration_category(runtime_s: int, rule: str) -> str:
    """OSPool's +JobDurationCategory for a runtime; refuses what no category allows."""
    if runtime_s < MEDIUM_LIMIT_S:
        return "Medium"
    if runtime_s < LONG_LIMIT_S:
        return "Long"
    raise SubmitValueError(
        rule, "resources.runtime", format_duration_s(runtime_s),
        f"jobs must finish within {format_duration_s(LONG_LIMIT_S)} (JobDurationCategory Long); split the "
        "chunk: fewer epochs per job and more chunks, so each job's runtime stays under 40h",
    )


def with_room_for_snakemake(resources: dict) -> dict:
    """The rule's resources, with room for the job's own Snakemake process."""
    sized = {name.split("_")[0] for name in resources if name.startswith(("mem", "disk"))}
    defaults = {name: value for name, value in SPAWNED_SNAKEMAKE_DEFAULTS.items() if name.split("_")[0] not in sized}
    resources = {**defaults, **resources}
    if "mem" in sized and isinstance(resources.get("mem_mb"), int):
        # Snakemake gives every memory resource as mem_mb too (and mem, mem_mib): keep one.
        resources = {name: value for name, value in resources.items() if name not in ("mem", "mem_mib")}
        resources["mem_mb"] += SPAWNED_SNAKEMAKE_MB
    return resources


def with_memory(resources: Mapping[str, object], mem_mb: int) -> dict:
    """`resources` asking for `mem_mb` of memory (Snakemake's other spellings of it dropped)."""
    return {**{name: value for name, value in resources.items() if name not in ("mem", "mem_mib")},
            "mem_mb": mem_mb}


def _unit(rule: str, field: str, value: object, parser) -> int:
    try:
        return parser(value, field=field)
    except UnitError as error:
        raise SubmitValueError(rule, field, value, str(error).removeprefix(f"{field}: ")) from None


def _count(rule: str, field: str, value: object, *, minimum: int) -> int:
    whole = (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and value.isdecimal())
    if not whole:
        raise SubmitValueError(rule, field, value, "must be a whole number")
    if int(value) < minimum:
        raise SubmitValueError(rule, field, value, f"must be at least {minimum}")
    return int(value)
