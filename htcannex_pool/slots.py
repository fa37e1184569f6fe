"""Execute slots: the pool's ordinary slots and the annexes' slots, as ClassAds.

Slots are static (one job per slot; no partitionable slots). Each advertises a
startd's Requirements: START, and the job's requests within the slot's resources
(htcondor_codes.SLOT_REQUIREMENTS); and what its starter can do: file transfer, its URL plugins'
methods (osdf, which transfer.py serves from the pool's origin). It advertises no container runtime:
the pool runs no image, and a real execute point without Apptainer advertises none either, so a
container job stays unmatched, as there. A slot told `containers=True` declares Apptainer's image kinds
for tests of the container submit path; the starter holds a container job that reaches one instead of
running it outside its image (starter.py). docs/pool.md lists what a slot advertises and what the pool does.
Annex slots use the START expression of HTCondor's annexes: only jobs that name the annex in
`TargetAnnexName` and belong to the annex's owner.
Ordinary slots take only jobs that target no annex, so a job aimed at an annex that is not up
waits for it, as on a real access point.
"""
import platform
import shutil
import time
from dataclasses import dataclass, field

import classad2
import htcondor2
from htcondor_codes import (CONTAINER_RUNTIME, SLOT_REQUIREMENTS, STARTER_CAPABILITIES, annex_start,
                            within_resource_limits)

from .jobads import FILESYSTEM_DOMAIN, MACHINE_ARCH
from .transfer import PLUGIN_METHODS

ORDINARY_START = "(TARGET.TargetAnnexName is undefined)"
# The version a slot's starter advertises, which jobs' Requirements compare: the pool stands for the HTCondor
# of its htcondor2 bindings.
CONDOR_VERSION = htcondor2.version()


@dataclass
class Slot:
    ad: classad2.ClassAd
    job: tuple[int, int] | None = None

    @property
    def name(self) -> str:
        return self.ad["Name"]


def _slot_ad(*, name: str, machine: str, cpus: int, memory_mb: int, gpus: int,
             gpu_memory_mb: int, gpu_capability: float, start: str, disk_kib: int,
             transfer_methods: str, containers: bool, extra: dict) -> classad2.ClassAd:
    ad = classad2.ClassAd({
        "MyType": "Machine", "Name": name, "Machine": machine, "Arch": MACHINE_ARCH,
        "OpSys": "LINUX", "Cpus": cpus, "Memory": memory_mb, "Disk": disk_kib, "GPUs": gpus,
        "State": "Unclaimed", "Activity": "Idle", "DaemonStartTime": int(time.time()),
        "FileSystemDomain": FILESYSTEM_DOMAIN, "CondorVersion": CONDOR_VERSION, **STARTER_CAPABILITIES, **extra,
    })
    # The URL methods the slot's transfer plugins serve; a starter without plugins advertises none.
    if transfer_methods:
        ad["HasFileTransferPluginMethods"] = transfer_methods
    # Declared (containers=True) as an execute point with Apptainer, which runs every kind of image; the starter
    # holds a container job that reaches such a slot (it runs no image).
    if containers:
        ad.update(CONTAINER_RUNTIME)
    # The resources the startd provisions (what the execute event reports, compat_classad_util.cpp).
    ad["MachineResources"] = "Cpus Disk Memory" + (" GPUs" if gpus else "")
    if gpus:
        ad["GPUs_GlobalMemoryMb"] = gpu_memory_mb
        ad["GPUs_Capability"] = gpu_capability
        devices = ", ".join(f'[ Id = "GPU-{i}"; GlobalMemoryMb = {gpu_memory_mb}; '
                            f"Capability = {gpu_capability} ]" for i in range(gpus))
        ad["AvailableGPUs"] = classad2.ExprTree("{ " + devices + " }")
    ad["Start"] = classad2.ExprTree(start)
    ad["Requirements"] = classad2.ExprTree(SLOT_REQUIREMENTS)
    ad["WithinResourceLimits"] = classad2.ExprTree(within_resource_limits(("GPUs",) if gpus else ()))
    return ad


def free_disk_kib(path) -> int:
    return shutil.disk_usage(path).free // 1024


def ordinary_slots(specs: list[dict], disk_kib: int) -> list[Slot]:
    """The pool's own slots, for jobs that target no annex."""
    host = platform.node() or "localhost"
    return [Slot(_slot_ad(name=f"slot{i}@{host}", machine=host, cpus=spec["cpus"],
                          memory_mb=spec["memory_mb"], gpus=spec.get("gpus", 0),
                          gpu_memory_mb=spec.get("gpu_memory_mb", 0),
                          gpu_capability=spec.get("gpu_capability", 0.0),
                          start=ORDINARY_START, disk_kib=disk_kib,
                          transfer_methods=spec.get("transfer_methods", PLUGIN_METHODS),
                          containers=spec.get("containers", False), extra={}))
            for i, spec in enumerate(specs, start=1)]


@dataclass
class Annex:
    """A named set of slots that comes up after a delay and expires after its lifetime."""
    spec: dict
    slots: list[Slot] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec["name"]

    @property
    def cgroups(self) -> bool:
        """Whether its jobs get per-job cgroups. Not by default: `htcondor annex create` starts its pilot's
        HTCondor as the user, in the batch job, and a starter that cannot switch ids makes per-job cgroups
        only with CREATE_CGROUP_WITHOUT_ROOT (src/condor_starter.V6.1/vanilla_proc.cpp,
        cgroup_v2_is_writeable), which no annex configuration sets (src/condor_scripts/annex/)."""
        return self.spec.get("cgroups", False)

    def up_at(self) -> float:
        return self.spec["created"] + self.spec["startup_delay_s"]

    def ends_at(self) -> float:
        return self.up_at() + self.spec["lifetime_s"]

    def state(self, now: float) -> str:
        if self.spec.get("expired"):
            return "expired"
        if not self.spec["comes_up"] or now < self.up_at():
            return "pending"
        return "up"

    def bring_up(self, disk_kib: int):
        spec = self.spec
        self.slots = [
            Slot(_slot_ad(name=f"slot1@{spec['name']}-host{node}", machine=f"{spec['name']}-host{node}",
                          cpus=spec["cpus"], memory_mb=spec["memory_mb"], gpus=spec["gpus"],
                          gpu_memory_mb=spec["gpu_memory_mb"], gpu_capability=spec["gpu_capability"],
                          start=annex_start(spec["owner"]), disk_kib=disk_kib,
                          transfer_methods=spec.get("transfer_methods", PLUGIN_METHODS),
                          containers=spec.get("containers", False),
                          extra={"AnnexName": spec["name"], "IsAnnex": True,
                                 "AnnexLifetimeEnd": int(self.ends_at())}))
            for node in range(1, spec["nodes"] + 1)]

    def summary(self, now: float) -> dict:
        return {**self.spec, "state": self.state(now), "slots": [slot.name for slot in self.slots],
                "busy": sum(slot.job is not None for slot in self.slots)}
