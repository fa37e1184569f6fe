"""HTCondor's numbers for a job's status and for why it is held, the START expression of an
annex's slots, a slot's Requirements, and the durations read from HTCondor's configuration: plain
values, shared by the plugin and the embedded pool (which writes and applies them as a real pool does).

Sources (HTCondor 25.x manual, docs/codes-other-values/ in the source tree):
- JobStatus: job-status-codes.rst; htcondor2 already has the enum, so it is used as is.
- HoldReasonCode: hold-table.rst (the member names are HTCondor's `NumHoldsByReason` labels).
- HoldReasonSubCode: for 34 [JobOutOfResources] the resource (102 memory, 104 disk); for
  6, 12, 13, 14 a Unix errno (Python's `errno` names those); for 3 [JobPolicy], 21 [StartdHeldJob]
  and 26 [SystemPolicy] whatever the policy's *_SUBCODE expression says (an admin's choice).
"""
import enum
import math

import htcondor2
from htcondor2 import JobStatus

__all__ = ["JobStatus", "HoldCode", "OutOfResources", "status_word", "annex_start", "DIRECT_ATTACH_START", "HEARD_FROM_LATELY",
           "param_seconds",
           "PARAM_DEFAULTS_S", "CHECKPOINT_EXIT_CODE", "WANT_FT_ON_CHECKPOINT", "SLOT_REQUIREMENTS", "within_resource_limits",
           "STARTER_CAPABILITIES", "CONTAINER_RUNTIME", "IMAGE_KINDS", "image_kind", "MEMORY_USAGE",
           "schedd_rounded", "schedd_memory_usage_mb"]

# The job ad attributes of a self-checkpointing job: condor_submit's `checkpoint_exit_code` is stored as
# SuccessCheckpointExitCode (condor_attributes.h ATTR_CHECKPOINT_EXIT_CODE), and with it submit_utils.cpp sets
# WantFTOnCheckpoint, without which the starter ignores the code (vanilla_proc.cpp JobReaper, outputOpenFlags).
CHECKPOINT_EXIT_CODE = "SuccessCheckpointExitCode"
WANT_FT_ON_CHECKPOINT = "WantFTOnCheckpoint"

# HTCondor's defaults (src/condor_utils/param_info.in) of the settings read with param_seconds.
PARAM_DEFAULTS_S = {
    "NEGOTIATOR_INTERVAL": 60.0,  # the longest a queued job waits for a negotiator's cycle
    "QUERY_TIMEOUT": 60.0,  # how long HTCondor's tools wait for a daemon's answer
    # How often an execute point without per-job cgroups (BASE_CGROUP = "") measures a job's memory.
    "PID_SNAPSHOT_INTERVAL": 15.0,
    # How long DAGMan's node jobs keep their claim when they end (their keep_claim_idle), for the next node.
    "DAGMAN_HOLD_CLAIM_TIME": 20.0,
}


class HoldCode(enum.IntEnum):
    """HoldReasonCode values the plugin or the pool uses, named by HTCondor's NumHoldsByReason labels."""

    Unspecified = 0  # the schedd's holdJob without a code (it cannot expand a job's $$() macro)
    UserRequest = 1  # condor_hold
    JobPolicy = 3  # the job's periodic_hold / on_exit_hold
    FailedToCreateProcess = 6  # the starter could not start the executable (subcode: errno)
    TransferOutputError = 12  # output or self-checkpoint transfer failed (subcode: errno)
    TransferInputError = 13  # input transfer failed (subcode: errno)
    SubmittedOnHold = 15  # `hold = true` in the submit description
    StartdHeldJob = 21  # the execute point's WANT_HOLD policy (subcode: WANT_HOLD_SUBCODE)
    SystemPolicy = 26  # the schedd's SYSTEM_PERIODIC_HOLD (subcode: SYSTEM_PERIODIC_HOLD_SUBCODE)
    JobOutOfResources = 34  # usage over a provisioned limit; the subcode names which
    JobExecuteExceeded = 47  # allowed_execute_duration exceeded


# The HoldReason a `hold = true` job has in its ad (submit_utils.cpp). HTCondor writes NO held event
# for it: its log shows the submit, then the release (seen on a real 25.14.0 pool).
SUBMITTED_ON_HOLD_REASON = "submitted on hold at user's request"

class OutOfResources(enum.IntEnum):
    """HoldReasonSubCode of HoldCode.JobOutOfResources: the resource that was exceeded."""

    Memory = 102
    Disk = 104


def status_word(status) -> str:
    """`held`, `idle`, ... for a JobStatus number (the number itself when HTCondor adds a new one)."""
    try:
        return JobStatus(status).name.lower().replace("_", " ")
    except ValueError:
        return str(status)


def annex_start(owner: str) -> str:
    """The START of an annex's slots: only jobs that name the annex (MY.TargetAnnexName) and belong
    to its owner. HTCondor's annex pilot configures it (src/condor_scripts/annex/spark.sh and the
    other site scripts); the plugin judges jobs against it, the embedded pool's annexes apply it."""
    return f'(MY.AnnexName =?= TARGET.TargetAnnexName) && (TARGET.Owner == "{owner}")'


# What an annex pilot's startd (STARTD_DIRECT_ATTACH_SCHEDD_NAME, which `htcondor annex create` sets) advertises to
# the collector as each slot's START: a string, "Directly attached to schedd NAME", so that no negotiator matches the
# slot; the real START goes to that schedd with the slot (src/condor_startd.V6/Resource.cpp, get_update_ads).
DIRECT_ATTACH_START = "Directly attached to schedd "


# A pilot's startd sends its slot ads every 5 s (spark.sh: UPDATE_INTERVAL = 5). One killed outright (its batch job's
# walltime, scancel) leaves them in the collector until they expire (CLASSAD_LIFETIME, 15 minutes by default): an
# annex slot not heard from for a minute belongs to a pilot that is gone. A constraint on a slot ad (the collector
# stamps LastHeardFrom; a slot without it, or of no annex, is kept).
HEARD_FROM_LATELY = "(AnnexName is undefined || LastHeardFrom is undefined || LastHeardFrom >= time() - 60)"


# What a startd advertises as a slot's Requirements, which the negotiator matches a job against: its START,
# and the job's requests within the slot's resources (src/condor_startd.V6/Reqexp.cpp publish_requirements; seen
# on a real 25.14.0 pool). A job that asks more than a slot has fails here, whatever its own Requirements say.
SLOT_REQUIREMENTS = "Start && WithinResourceLimits"


# What every 25.x starter advertises in its slot's ad, whatever its site (starter_v61_main.cpp printClassAd): the
# job's file-transfer clause and a self-checkpointing job's clause judge them.
STARTER_CAPABILITIES = {"HasFileTransfer": True, "HasSelfCheckpointTransfers": True}

# A container job's image, by kind (submit_utils.cpp image_type_from_string): the job attribute condor_submit sets
# for it, and the slot attribute the job's Requirements then ask for (SetRequirements), which a starter advertises
# when its container runtime (Apptainer) runs that kind. Every container job also asks for HasContainer.
IMAGE_KINDS = {"docker": ("WantDockerImage", "HasDockerURL"), "sif": ("WantSIF", "HasSIF"),
               "sandbox": ("WantSandboxImage", "HasSandboxImage")}
CONTAINER_RUNTIME = {"HasContainer": True, **{slot: True for _, slot in IMAGE_KINDS.values()}}


def image_kind(image: str) -> str:
    """A container image's kind as condor_submit reads it: a `docker:` reference, a `.sif` file, or else an
    unpacked (sandbox) directory."""
    image = image.strip()
    if image.startswith("docker:"):
        return "docker"
    return "sif" if image.endswith(".sif") else "sandbox"


# The schedd stores a job's ResidentSetSize, ImageSize, DiskUsage, ExecutableSize and ProportionalSetSizeKb rounded up
# to a quarter of their order of magnitude, and the value it was given as <name>_RAW (qmgmt.cpp SetAttribute;
# param_info.in SCHEDD_ROUND_ATTR_<name> = 25%). Seen on a 25.14.0 pool: ResidentSetSize_RAW = 114256,
# ResidentSetSize = 125000; DiskUsage_RAW = 1468, DiskUsage = 1500.
SCHEDD_ROUNDING_PERCENT = 25
# A job's MemoryUsage (MB) in the schedd's ad, from the rounded ResidentSetSize (seen in a 25.14.0 job ad): what a
# SYSTEM_PERIODIC_HOLD on `MemoryUsage > RequestMemory` judges, up to half again the memory the job used.
MEMORY_USAGE = "((ResidentSetSize + 1023) / 1024)"


def schedd_rounded(value: int) -> int:
    """`value` as the schedd stores a rounded attribute: up to a multiple of 25% of the power of ten nearest
    value/5 from below (1468 -> 1500, 50176 -> 75000)."""
    if not value:
        return value
    magnitude = int(math.log10(abs(value) / 5) + 1)  # truncated toward zero, as the schedd's (int) cast
    step = 10 ** magnitude * SCHEDD_ROUNDING_PERCENT / 100
    return int(math.ceil(value / step) * step)


def schedd_memory_usage_mb(resident_kib: int) -> int:
    """The MemoryUsage a schedd's job ad shows for `resident_kib` of resident memory."""
    return (schedd_rounded(resident_kib) + 1023) // 1024


def within_resource_limits(machine_resources: tuple[str, ...] = ()) -> str:
    """A slot's WithinResourceLimits (src/condor_startd.V6/ResAttributes.cpp withinLimitsExpression, without
    STARTD_JOB_HAS_REQUEST_ATTRS): cores, memory and disk, then a term for each custom machine resource the slot
    has (GPUs on a GPU machine). A 25.14.0 startd subtracts the space of the job's requested catalogs from
    RequestDisk; htcannex's jobs request none, so the disk term is RequestDisk alone."""
    return ("MY.Cpus > 0 && TARGET.RequestCpus <= MY.Cpus && MY.Memory > 0 && TARGET.RequestMemory <= MY.Memory && "
            "MY.Disk > 0 && TARGET.RequestDisk <= MY.Disk"
            + "".join(f" && (TARGET.Request{name} is UNDEFINED || MY.{name} >= TARGET.Request{name})"
                      for name in machine_resources))


def param_seconds(name: str) -> float:
    """A duration setting as HTCondor's own tools read it: from its configuration (a condor_config, or
    `_CONDOR_<name>` in the environment), else its default; an expression that is not a number, the default."""
    default = PARAM_DEFAULTS_S[name]
    try:
        return float(htcondor2.param.get(name, default))
    except ValueError:
        return default
