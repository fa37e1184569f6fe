"""One site of the catalogue: its limits and quirks, and the verdict on whether it can run a job.

`Site.admit(request)` is the one judgement of a job against a site, made before anything is
submitted (description.build_submit) and when a waiting job is moved to another site
(recovery.next_site): the request as it would be submitted there, or why the site cannot run it
(see docs/sites.md for the rules).
"""
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from snakemake_executor_plugin_htcannex.sites.catalogue_schema import HtcannexConfigError
from snakemake_executor_plugin_htcannex.units import format_duration_s, format_size_mib

PLACEHOLDER = "CHANGE_ME"
ANNEX_NAME_PREFIX = "htcannex-"


class SiteKind(enum.Enum):
    """Where a site's slots come from (htcannex.yaml's `kind:`)."""

    ANNEX = "annex"  # an annex htcannex creates with `htcondor annex create` (or the user starts by hand)
    POOL = "pool"  # a pool's own slots (CHTC, OSPool): htcannex submits there and creates nothing


class MemoryRequest(enum.Enum):
    """What a site does with a job's request_memory (htcannex.yaml's `memory_request:`)."""

    PASS = "pass"  # submitted as asked
    DROP = "drop"  # left out: the site gives whole nodes, and a job gets the node's memory
    REFUSE = "refuse"  # the job cannot run there; the user removes its memory request or picks drop


class SiteRefusal(ValueError):
    """A job a site cannot run; the message says why and what to do."""


def annex_name(site: str) -> str:
    """The annex name for a site: jobs carry it as MY.TargetAnnexName, slots as AnnexName."""
    return f"{ANNEX_NAME_PREFIX}{site}"


@dataclass(frozen=True)
class ResourceRequest:
    """What one job asks for, in HTCondor's units (MiB, seconds)."""

    cpus: int = 1
    memory_mb: int | None = None
    disk_mb: int | None = None
    gpus: int = 0
    gpu_model: str | None = None
    gpu_memory_mb: int | None = None
    gpu_capability: float | None = None
    runtime_s: int | None = None
    duration_category: str | None = None  # OSPool's JobDurationCategory of runtime_s (submit/request.py)


@dataclass(frozen=True)
class AnnexRequest:
    """The arguments of `htcondor annex create` for one site (None: not passed)."""

    name: str
    system: str | None
    queue: str | None
    nodes: int
    lifetime_s: int
    project: str | None
    login: str | None
    gpus: int | None
    gpu_type: str | None
    cpus: int | None
    mem_mb: int | None


@dataclass(frozen=True)
class Admission:
    """A site's verdict on one job: `request` as it will be submitted there, or `refusal` (why the
    site cannot run it and what to do), never both."""

    request: ResourceRequest | None
    refusal: str | None = None
    # An MLDAG chunk's own submit description, filled for this site (an htcondor2.Submit; submit/template.py).
    template: object | None = None

    def or_raise(self) -> ResourceRequest:
        if self.refusal is not None:
            raise SiteRefusal(self.refusal)
        return self.request


@dataclass(frozen=True)
class Site:
    name: str
    kind: SiteKind
    source: str  # the catalogue file, for messages
    cpus: int | None
    memory_mb: int | None
    gpus: int = 0
    gpu_type: str | None = None
    gpu_memory_mb: int | None = None
    gpu_capability: float | None = None
    disk_mb: int | None = None  # a chunk's share of node-local disk (MLDAG's {resource.disk})
    memory_request: MemoryRequest = MemoryRequest.PASS
    requirements: str | None = None
    submit_commands: Mapping[str, object] = field(default_factory=dict)  # escape hatch, jobs here
    # annex sites
    create: str = "htcannex"  # "manual": the user brings the annex up by hand (annex.AnnexManager)
    facts: str = "system-table"
    system: str | None = None
    queue: str | None = None
    allocation: str = "cores_or_ram"  # SYSTEM_TABLE's allocation_type
    nodes: int = 1
    max_lifetime_s: int | None = None
    lifetime_s: int | None = None
    project: str | None = None
    login: str | None = None
    gpu_type_flag: str | None = None  # --gpu-type, only where the table lists GPU types
    # pool sites
    max_runtime_s: int | None = None

    @property
    def annex_name(self) -> str:
        return annex_name(self.name)

    @property
    def manual(self) -> bool:
        """An annex htcannex never requests: the user starts it by hand (sites.NAME.create: manual)."""
        return self.create == "manual"

    @property
    def whole_node(self) -> bool:
        return self.allocation == "node"

    @property
    def annex_core_hours(self) -> float:
        """Core-hours one annex here costs (all its nodes for its whole lifetime)."""
        return self.nodes * (self.cpus or 0) * (self.lifetime_s or 0) / 3600

    def slot_shape(self) -> dict:
        """Per-node slot shape, as `Pool.create_annex` takes it."""
        return {
            "cpus": self.cpus,
            "memory_mb": self.memory_mb,
            "gpus": self.gpus,
            "gpu_memory_mb": self.gpu_memory_mb or 0,
            "gpu_capability": self.gpu_capability or 0.0,
        }

    def annex_request(self) -> AnnexRequest:
        """What to ask `htcondor annex create` for; refuses placeholders and pool sites."""
        if self.kind is not SiteKind.ANNEX:
            raise HtcannexConfigError(
                self.source, f"sites.{self.name}.kind", "is 'pool': htcannex does not create annexes there",
                f"submit to that pool's access point, or make {self.name} an annex site",
            )
        for key in ("project", "login"):
            if getattr(self, key) == PLACEHOLDER:
                raise HtcannexConfigError(
                    self.source, f"sites.{self.name}.{key}",
                    f"is still the placeholder {PLACEHOLDER}, so no annex can be created at {self.name}",
                    f"set your {'allocation (project id)' if key == 'project' else 'ssh login'} at {self.name}",
                )
        return self.annex_arguments()

    def annex_arguments(self) -> AnnexRequest:
        """`annex_request()` without the placeholder check (the loader validates these)."""
        sized_by_count = self.allocation == "cores_or_ram"
        return AnnexRequest(
            name=self.annex_name,
            system=self.system,
            queue=self.queue,
            nodes=self.nodes,
            lifetime_s=self.lifetime_s,
            project=self.project,
            login=self.login,
            # On a whole-node queue every GPU of the node comes with it: --gpus is not passed.
            gpus=self.gpus if self.gpus and self.allocation != "node" else None,
            gpu_type=self.gpu_type_flag,
            cpus=self.cpus if sized_by_count else None,
            mem_mb=self.memory_mb if sized_by_count else None,
        )

    def admit(self, request: ResourceRequest, *, rule: str) -> "Admission":
        """This site's verdict on `request`: the request as it will be submitted here, or why the
        site cannot run it. Pure: nothing is raised, looked up or changed."""

        def refuse(why: str, fix: str) -> Admission:
            return Admission(None, f"rule {rule} cannot run at site {self.name}: {why}; {fix}")

        where = f"{self.name}" + (f" ({self.queue})" if self.queue else "")
        if self.cpus is not None and request.cpus > self.cpus:
            return refuse(f"it asks for {request.cpus} cpus (threads) and a {where} node has {self.cpus}",
                          f"set threads to {self.cpus} or fewer, or take {self.name} out of the rule's rotation")
        if request.gpus and not self.gpus:
            return refuse(f"it asks for {request.gpus} GPU(s) and {where} is a CPU-only queue",
                          f"take {self.name} out of the rule's rotation, or give it a GPU queue in htcannex.yaml")
        if request.gpus > self.gpus:
            return refuse(f"it asks for {request.gpus} GPUs and a {where} node has {self.gpus}",
                          f"set the rule's gpu resource to {self.gpus} or fewer")
        if request.gpus and request.gpu_model and self.gpu_type and \
                request.gpu_model.casefold() not in self.gpu_type.casefold():
            return refuse(f"it asks for GPU model {request.gpu_model!r} and {where} has {self.gpu_type}",
                          "drop gpu_model from the rule's resources or take the site out of its rotation")
        if request.gpu_memory_mb and self.gpu_memory_mb is not None and request.gpu_memory_mb > self.gpu_memory_mb:
            return refuse(f"it asks for {format_size_mib(request.gpu_memory_mb)} of GPU memory and {where} GPUs have "
                          f"{format_size_mib(self.gpu_memory_mb)}", "lower gpu_memory or use a site with bigger GPUs")
        if request.gpu_capability and self.gpu_capability is not None and request.gpu_capability > self.gpu_capability:
            return refuse(f"it asks for GPU capability {request.gpu_capability} and {where} GPUs have {self.gpu_capability}",
                          "lower gpu_capability or use a site with newer GPUs")
        annex = self.kind is SiteKind.ANNEX
        limit_s = self.lifetime_s if annex else self.max_runtime_s
        if request.runtime_s is not None and limit_s is not None and request.runtime_s > limit_s:
            what = "the annex lifetime" if annex else "the longest job the pool runs"
            raise_limit = (f"or raise sites.{self.name}.lifetime (up to {format_duration_s(self.max_lifetime_s)})"
                           if annex else "")
            return refuse(f"its runtime {format_duration_s(request.runtime_s)} is longer than {what} at {self.name} "
                          f"({format_duration_s(limit_s)})",
                          f"split the chunk (fewer epochs per job, more chunks) {raise_limit}".strip())
        if request.disk_mb is not None and self.disk_mb is not None and request.disk_mb > self.disk_mb:
            return refuse(f"it asks for {format_size_mib(request.disk_mb)} of disk and a job at {where} has "
                          f"{format_size_mib(self.disk_mb)}", f"set disk_mb to {self.disk_mb} or less")
        if request.memory_mb is None:
            return Admission(request)
        if self.memory_request is MemoryRequest.REFUSE:
            return refuse(f"it asks for {format_size_mib(request.memory_mb)} of memory and {where} takes whole nodes "
                          "(memory_request: refuse)",
                          f"remove mem_mb/mem from the rule, or set sites.{self.name}.memory_request to drop")
        if self.memory_request is MemoryRequest.DROP:
            return Admission(replace(request, memory_mb=None))
        if self.memory_mb is not None and request.memory_mb > self.memory_mb:
            return refuse(f"it asks for {format_size_mib(request.memory_mb)} of memory and a {where} node has "
                          f"{format_size_mib(self.memory_mb)}", f"set mem_mb to {self.memory_mb} or less")
        return Admission(request)
