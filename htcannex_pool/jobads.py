"""Job ads from submit commands, built as condor_submit builds them.

The client sends the submit commands (`dict(htcondor2.Submit.items())`) and
one dict of queue variables per proc; here each proc's commands are expanded
with `htcondor2.Submit.expand` (so `$(ClusterId)`, `$(ProcId)`, `$(Cluster)`,
`$(Process)`, `$(Item)` and item variables behave as in condor_submit), then
translated into the job ClassAd the schedd would hold. Every value is checked
here: a bad one raises `SubmitError` naming the command and the value, and
nothing of that submit is queued.
"""
import fnmatch
import platform
import re
import signal
import time
from pathlib import Path

import classad2
import htcondor2
from htcondor_codes import (CHECKPOINT_EXIT_CODE, IMAGE_KINDS, SUBMITTED_ON_HOLD_REASON, WANT_FT_ON_CHECKPOINT,
                            HoldCode, JobStatus, image_kind, schedd_rounded)

from . import disk, quoting, units

UNIVERSES = {"vanilla": 5, "local": 12}
# `universe = container` is a topping of vanilla, not a universe (submit_utils.cpp SetUniverse): JobUniverse 5 and
# WantContainer, as for a vanilla or local job that names a container_image.
CONTAINER_TOPPING = "container"
# Image URL schemes the container runtime pulls itself: condor_submit never transfers those
# (process_container_input_files), and records the scheme as the job's ContainerImageSource.
PULLED_IMAGE_SCHEMES = ("docker", "oras")
# Commands whose value is a ClassAd expression stored under an ad attribute.
EXPRESSION_COMMANDS = {
    "periodic_release": "PeriodicRelease",
    "periodic_remove": "PeriodicRemove",
    "periodic_hold": "PeriodicHold",
    "on_exit_remove": "OnExitRemove",
}
INTEGER_COMMANDS = {
    "checkpoint_exit_code": CHECKPOINT_EXIT_CODE,
    "max_retries": "JobMaxRetries",
    "allowed_execute_duration": "AllowedExecuteDuration",
    "success_exit_code": "JobSuccessExitCode",  # condor_attributes.h ATTR_JOB_SUCCESS_EXIT_CODE
    "job_max_vacate_time": "JobMaxVacateTime",
}
# Commands whose value is a string stored under an ad attribute.
STRING_COMMANDS = {
    # machine ad attributes the execute event carries besides the slot's resources (htcondor-jdl.rst)
    "ulog_execute_attrs": "UserLogExecuteEventAttrs",
    "notify_user": "NotifyUser",
    "batch_name": "JobBatchName",
}
# JobNotification values (proc.h's NOTIFY_*); the pool records them and sends no mail.
NOTIFICATIONS = {"never": 0, "always": 1, "complete": 2, "error": 3, "start": 4}
# Signals by name (SIGINT) or number, kept as the name.
SIGNAL_COMMANDS = {"kill_sig": "KillSig", "remove_kill_sig": "RemoveKillSig"}
MACHINE_ARCH = platform.machine().upper().replace("AMD64", "X86_64")
# The pool's FILESYSTEM_DOMAIN, HTCondor's default ($(FULL_HOSTNAME)): the submit machine's and every slot's.
FILESYSTEM_DOMAIN = platform.node() or "localhost"
# Universes whose jobs may transfer files (submit_utils.cpp mightTransfer); a container job is a vanilla job.
TRANSFERRING_UNIVERSES = {UNIVERSES["vanilla"]}
# The clause of a job that runs on the submit machine's filesystem (should_transfer_files NO or IF_NEEDED).
SAME_FILESYSTEM = "(TARGET.FileSystemDomain == MY.FileSystemDomain)"
# A job's RequestDisk without request_disk: JOB_DEFAULT_REQUESTDISK's default (param_info.in), in KiB.
DEFAULT_REQUEST_DISK = "MAX({1024, (TransferInputSizeMB+1) * 1.25}) * 1024"


class SubmitError(ValueError):
    """A submit description condor_submit would refuse."""


def _commands(items: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split into (lower-cased submit command -> key, custom attribute -> key).
    `htcondor2.Submit` already spells `+Attr` as `MY.Attr`."""
    commands, custom = {}, {}
    for key in items:
        if key[:3].upper() == "MY.":
            custom[key[3:]] = key
        else:
            commands[key.lower()] = key
    return commands, custom


def _boolean(command: str, value: str) -> bool:
    text = value.strip().lower()
    if text in ("true", "yes", "1", "t", "y"):
        return True
    if text in ("false", "no", "0", "f", "n", ""):
        return False
    raise SubmitError(f"{command} = {value} is invalid: expected true or false")


def _expression(command: str, value: str) -> classad2.ExprTree:
    try:
        return classad2.ExprTree(value)
    except Exception:
        raise SubmitError(f"{command} = {value} is not a valid ClassAd expression") from None


def _integer(command: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise SubmitError(f"{command} = {value} is invalid: expected an integer") from None


def _number(command: str, value: str) -> float:
    try:
        return float(value.strip())
    except ValueError:
        raise SubmitError(f"{command} = {value} is invalid: expected a number") from None


def _signal(command: str, value: str) -> str:
    text = value.strip().upper()
    try:
        return signal.Signals(int(text)).name if text.isdecimal() else signal.Signals[
            text if text.startswith("SIG") else f"SIG{text}"].name
    except (KeyError, ValueError):
        raise SubmitError(f"{command} = {value} is not a signal (e.g. SIGINT or 2)") from None


def getenv_selects(matchlist: str, name: str) -> bool:
    """Whether `getenv = matchlist` imports variable `name` (HTCondor 8.9.7+: names and `*`
    patterns, matched case-insensitively; a `!` member rejects what it matches; true is `*`)."""
    members = [member for member in re.split(r"[,;\s]+", matchlist.strip()) if member]
    members = ["*" if member.lower() in ("true", "yes", "1") else member for member in members]
    rejected = any(fnmatch.fnmatchcase(name.upper(), member[1:].upper())
                   for member in members if member.startswith("!"))
    return not rejected and any(fnmatch.fnmatchcase(name.upper(), member.upper())
                                for member in members if not member.startswith("!"))


def file_list(value: str) -> list[str]:
    """A comma-separated list of files, as transfer_input_files takes it."""
    return [entry.strip() for entry in value.replace("\n", ",").split(",") if entry.strip()]


class ClusterBuilder:
    """Builds the job ads of one submit (one cluster)."""

    def __init__(self, items: dict[str, str], *, submit_dir: str, owner: str,
                 submit_environment: dict[str, str] | None):
        self._description = htcondor2.Submit(dict(items))
        self._commands, self._custom = _commands(items)
        self._submit_dir = submit_dir
        self._owner = owner
        self._submit_environment = submit_environment or {}

    def build(self, cluster: int, proc: int, variables: dict[str, str]) -> classad2.ClassAd:
        description = self._description
        for name, value in {"ClusterId": cluster, "Cluster": cluster, "ProcId": proc,
                            "Process": proc, **variables}.items():
            description[name] = str(value)

        def get(command: str, default: str | None = None) -> str | None:
            key = self._commands.get(command)
            return description.expand(key) if key is not None else default

        ad = classad2.ClassAd()
        now = int(time.time())
        ad.update({"MyType": "Job", "ClusterId": cluster, "ProcId": proc, "Owner": self._owner,
                   "User": f"{self._owner}@{platform.node()}", "QDate": now,
                   "EnteredCurrentStatus": now, "NumJobStarts": 0, "NumJobCompletions": 0,
                   "JobRunCount": 0, "NumShadowStarts": 0})
        iwd = Path(self._submit_dir, get("initialdir") or get("iwd") or ".").resolve()
        ad["Iwd"] = str(iwd)
        self._set_universe(ad, get)
        self._set_executable(ad, get, iwd)
        self._set_arguments_and_environment(ad, get)
        self._set_files(ad, get)
        self._set_resources(ad, get)
        for command, attribute in EXPRESSION_COMMANDS.items():
            if get(command) is not None:
                ad[attribute] = _expression(command, get(command))
        for command, attribute in INTEGER_COMMANDS.items():
            if get(command) is not None:
                ad[attribute] = _integer(command, get(command))
        if CHECKPOINT_EXIT_CODE in ad:  # as submit_utils.cpp: the starter acts on the code only with it
            ad[WANT_FT_ON_CHECKPOINT] = True
        notification = get("notification", "never").strip().lower()
        if notification not in NOTIFICATIONS:
            raise SubmitError(f"notification = {notification}: must be Never, Always, Complete, Start or Error")
        ad["JobNotification"] = NOTIFICATIONS[notification]
        for command, attribute in STRING_COMMANDS.items():
            if get(command) is not None:
                ad[attribute] = get(command)
        for command, attribute in SIGNAL_COMMANDS.items():
            if get(command) is not None:
                ad[attribute] = _signal(command, get(command))
        for attribute, key in self._custom.items():
            ad[attribute] = _expression(key, description.expand(key))
        self._set_requirements(ad, get)
        if _boolean("hold", get("hold", "false")):
            ad.update({"JobStatus": JobStatus.HELD, "HoldReason": SUBMITTED_ON_HOLD_REASON,
                       "HoldReasonCode": HoldCode.SubmittedOnHold, "HoldReasonSubCode": 0})
        else:
            ad["JobStatus"] = JobStatus.IDLE
        return ad

    def _set_universe(self, ad, get):
        universe = get("universe", "vanilla").strip().lower()
        topping = universe == CONTAINER_TOPPING
        universe = "vanilla" if topping else universe
        if universe not in UNIVERSES:
            raise SubmitError(f"universe = {universe} is not supported by the embedded pool "
                              f"(supported: {', '.join([*UNIVERSES, CONTAINER_TOPPING])})")
        ad["JobUniverse"] = UNIVERSES[universe]
        image = (get("container_image") or "").strip()
        if topping and not image:
            raise SubmitError("container jobs require a container_image")  # condor_submit's words
        if image:  # a container job, whichever way it was asked for
            ad["WantContainer"] = True
            ad["ContainerImage"] = image
            ad[IMAGE_KINDS[image_kind(image)][0]] = True

    def _set_executable(self, ad, get, iwd: Path):
        executable = get("executable")
        if not executable and ad.get("WantContainer"):
            # condor_submit lets the image's own runscript run (Cmd ""); the pool has no container runtime.
            raise SubmitError("no executable: the embedded pool runs a container job's executable itself (it has no "
                              "container runtime to run the image's runscript); give `executable = PATH`")
        if not executable:
            raise SubmitError("no executable: the submit description needs `executable = PATH`")
        transfer = _boolean("transfer_executable", get("transfer_executable", "true"))
        path = Path(iwd, executable)
        if transfer and not path.is_file():
            raise SubmitError(f"executable = {executable}: {path} does not exist")
        ad["Cmd"] = str(path)
        ad["TransferExecutable"] = transfer

    def _set_arguments_and_environment(self, ad, get):
        arguments = get("arguments")
        try:
            if arguments is not None:
                # The ad keeps condor_submit's raw new-syntax form in `Arguments` (quoting.join_arguments).
                ad["Arguments"] = quoting.join_arguments(quoting.parse_arguments(arguments))
            environment = {}
            getenv = get("getenv", "false")
            if getenv.strip().lower() not in ("false", "no", "0", ""):
                environment.update({name: value for name, value in self._submit_environment.items()
                                    if getenv_selects(getenv, name)})
            if get("environment") is not None:
                environment.update(quoting.parse_environment(get("environment")))
        except quoting.QuotingError as error:
            raise SubmitError(str(error)) from None
        ad["Environment"] = quoting.join_environment(environment)

    def _set_files(self, ad, get):
        for command, attribute, default in (("input", "In", "/dev/null"),
                                            ("output", "Out", "/dev/null"),
                                            ("error", "Err", "/dev/null")):
            ad[attribute] = get(command, default).strip()
        if get("log"):
            ad["UserLog"] = str(Path(ad["Iwd"], get("log").strip()))
        should = get("should_transfer_files", "IF_NEEDED").strip().upper()  # condor_submit's default
        if should not in ("YES", "NO", "IF_NEEDED"):
            raise SubmitError(f"should_transfer_files = {should} is invalid: use YES, NO or IF_NEEDED")
        # Kept as written, as condor_submit keeps it. Every slot shares the submit machine's FileSystemDomain, so
        # IF_NEEDED finds the submit directory shared and transfers nothing, as NO (the pool transfers for YES).
        ad["ShouldTransferFiles"] = should
        if should != "YES":  # submit_utils.cpp: the domain the job's shared-filesystem clause compares
            ad["FileSystemDomain"] = FILESYSTEM_DOMAIN
        given = get("when_to_transfer_output")
        when = (given or "ON_EXIT").strip().upper()
        if when not in ("ON_EXIT", "ON_SUCCESS", "ON_EXIT_OR_EVICT"):
            raise SubmitError(f"when_to_transfer_output = {when} is invalid: use ON_EXIT, ON_SUCCESS "
                              "or ON_EXIT_OR_EVICT")
        if should != "NO":
            ad["WhenToTransferOutput"] = when
        elif given is not None:
            # submit_utils.cpp SetTransferFiles: without file transfer nothing comes back (a 25.14.0 job ad has no
            # WhenToTransferOutput then), and a when_to_transfer_output contradicts it.
            raise SubmitError(f"when_to_transfer_output = {when} contradicts should_transfer_files = NO: "
                              "leave when_to_transfer_output out, or transfer files (YES)")
        ad["PreserveRelativePaths"] = _boolean("preserve_relative_paths",
                                               get("preserve_relative_paths", "false"))
        if should == "NO" and (get("transfer_input_files") is not None or get("transfer_output_files") is not None):
            raise SubmitError("transfer_input_files or transfer_output_files name files to transfer, but "
                              "should_transfer_files = NO: set it to YES or leave the lists out")
        for command, attribute in (("transfer_input_files", "TransferInput"),
                                   ("transfer_output_files", "TransferOutput")):
            if get(command) is not None:  # rejoined without spaces, as SetTransferFiles joins its lists
                ad[attribute] = ",".join(file_list(get(command)))
        for command, attribute in (("transfer_checkpoint_files", "TransferCheckpoint"),
                                   ("output_destination", "OutputDestination")):
            if get(command) is not None:
                ad[attribute] = get(command).strip()
        if ad.get("WantContainer"):
            self._set_container_transfer(ad, get, should)
        remaps = get("transfer_output_remaps")
        if remaps is not None:
            # Taken as it is (trim_and_strip_quotes_in_place); an entry without '=' is skipped when the outputs
            # come back (remaps.py).
            ad["TransferOutputRemaps"] = remaps.strip().strip('"')
        # What is transferred in, as condor_submit sizes it (SetImageSize, SetTransferFiles): the executable and
        # each input file or directory, in KiB rounded up, URLs and missing files 0; TransferInputSizeMB feeds the
        # default RequestDisk.
        executable = disk.size_kib(Path(ad["Cmd"]))
        inputs = sum(disk.size_kib(Path(ad["Iwd"], name)) for name in file_list(ad.get("TransferInput", ""))
                     if "://" not in name)
        set_rounded(ad, "ExecutableSize", executable)
        set_rounded(ad, "DiskUsage", executable + inputs)
        ad["TransferInputSizeMB"] = (executable + inputs + 1023) // 1024

    @staticmethod
    def _set_container_transfer(ad, get, should: str):
        """How the image reaches the execute point (submit_utils.cpp process_container_input_files): last in the
        job's input files, sent by HTCondor's own file transfer ("cedar") or fetched from its URL, which then runs
        under its file name; pulled by the runtime itself (docker://, oras://); or, with `transfer_container =
        false`, read where it is, on a filesystem the execute point shares ("local")."""
        image = ad["ContainerImage"]
        if get("transfer_container") is not None:
            ad["TransferContainer"] = _boolean("transfer_container", get("transfer_container"))
            if not ad["TransferContainer"]:
                ad["ContainerImageSource"] = "local"
                return
        scheme = image.split("://", 1)[0].lower() if "://" in image else None
        if scheme in PULLED_IMAGE_SCHEMES:
            ad["ContainerImageSource"] = scheme
            return
        if should == "NO":
            raise SubmitError(f"container_image = {image} is transferred to the job, but should_transfer_files = NO: "
                              "set transfer_container = false for an image on the shared filesystem, or transfer "
                              "files (YES)")
        ad["TransferInput"] = ",".join([*file_list(ad.get("TransferInput", "")), image])
        ad["ContainerImageSource"] = scheme or "cedar"
        if scheme:
            ad["ContainerImage"] = image.rstrip("/").rsplit("/", 1)[-1]

    def _set_resources(self, ad, get):
        try:
            ad["RequestCpus"] = _integer("request_cpus", get("request_cpus", "1"))
            ad["RequestMemory"] = units.memory_mib("request_memory", get("request_memory", "128"))
            requested_disk = get("request_disk")
            ad["RequestDisk"] = (units.disk_kib("request_disk", requested_disk) if requested_disk
                                 else classad2.ExprTree(DEFAULT_REQUEST_DISK))
            gpus = _integer("request_gpus", get("request_gpus", "0"))
            minimum_memory = get("gpus_minimum_memory")
            minimum_capability = get("gpus_minimum_capability")
        except units.SizeError as error:
            raise SubmitError(str(error)) from None
        if gpus:
            ad["RequestGPUs"] = gpus
        # As condor_submit: the GPU properties become RequireGPUs, matched per device.
        clauses = []
        if minimum_memory is not None:
            try:
                clauses.append(f"GlobalMemoryMb >= {units.memory_mib('gpus_minimum_memory', minimum_memory)}")
            except units.SizeError as error:
                raise SubmitError(str(error)) from None
        if minimum_capability is not None:
            clauses.append(f"Capability >= {_number('gpus_minimum_capability', minimum_capability)}")
        if get("require_gpus") is not None:
            clauses.append(f"({_expression('require_gpus', get('require_gpus'))})")
        if clauses:
            ad["RequireGPUs"] = classad2.ExprTree(" && ".join(clauses))

    def _set_requirements(self, ad, get):
        """condor_submit's Requirements (submit_utils.cpp SetRequirements, as a 25.14.0 schedd stores them): the
        user's, then a clause for each fact the job needs of a slot that the user's do not judge already.
        Memory and cores only when more than 1 is asked; a slot's own Requirements judge every request
        (htcondor_codes.within_resource_limits)."""
        clauses, judged = [], set()
        if get("requirements") is not None:
            user = _expression("requirements", get("requirements"))
            clauses.append(f"({user})")
            judged = _slot_attributes_named(ad, user)
        if "arch" not in judged:
            clauses.append(f'(TARGET.Arch == "{MACHINE_ARCH}")')
        if ad.get("WantContainer"):
            # No OpSys clause: the image brings its own. A runtime, and one that runs this kind of image (its Want*
            # attribute, set from the image as given: a URL's image has become its file name since).
            kind = [slot for want, slot in IMAGE_KINDS.values() if ad.get(want)]
            clauses += ["TARGET.HasContainer", *(f"TARGET.{slot}" for slot in kind)]
        elif "opsys" not in judged:
            clauses.append('(TARGET.OpSys == "LINUX")')
        transfers = ad["JobUniverse"] in TRANSFERRING_UNIVERSES
        if "disk" in judged:
            clauses.append("(TARGET.Disk >= RequestDisk)")
        elif isinstance(ad["RequestDisk"], classad2.ExprTree) or ad["RequestDisk"] > 0:
            # A 25.12+ starter takes the space of common files off RequestDisk itself, so the slot's
            # WithinResourceLimits judges it there.
            clauses.append('(versionGE(split(TARGET.CondorVersion)[1], "25.12.0") || (TARGET.Disk >= RequestDisk))'
                           if transfers else "(TARGET.Disk >= RequestDisk)")
        if ad["RequestMemory"] > 1:
            clauses.append("(TARGET.Memory >= RequestMemory)")
        if ad["RequestCpus"] > 1 and "cpus" not in judged:
            clauses.append("(TARGET.Cpus >= RequestCpus)")
        if "RequestGPUs" in ad:
            clauses.append("(TARGET.GPUs >= RequestGPUs)")
            if "RequireGPUs" in ad:
                clauses.append("(countMatches(MY.RequireGPUs, TARGET.AvailableGPUs) >= RequestGPUs)")
        if transfers:
            clauses += _file_transfer_clause(ad, judged)
        if ad.get(WANT_FT_ON_CHECKPOINT) is True and "hasselfcheckpointtransfers" not in judged:
            clauses.append("TARGET.HasSelfCheckpointTransfers")
        ad["Requirements"] = classad2.ExprTree(" && ".join(clauses))


def _slot_attributes_named(ad: classad2.ClassAd, expression: classad2.ExprTree) -> set[str]:
    """The slot attributes an expression names (TARGET's, and names the job ad lacks), lower-cased: condor_submit
    leaves out its own clause for a fact the user's requirements judge (SetRequirements' machine_refs)."""
    names = set()
    for reference in ad.externalRefs(expression):
        scope, _, name = reference.rpartition(".")
        if scope.upper() != "MY":
            names.add(name.lower())
    return names


def url_methods(ad: classad2.ClassAd) -> list[str]:
    """The transfer plugin methods a job's URLs need (input URLs, an output destination, remaps to URLs), as
    condor_submit lists them in WantTransferPluginMethods: the scheme, or its part after a `+`, `-` or `.`."""
    urls = [name for name in file_list(ad.get("TransferInput", "")) if "://" in name]
    urls += [ad["OutputDestination"]] if "://" in ad.get("OutputDestination", "") else []
    urls += [remap.partition("=")[2].strip() for remap in ad.get("TransferOutputRemaps", "").split(";")
             if "://" in remap.partition("=")[2]]
    methods = {}
    for url in urls:
        method = re.split(r"[+.-]", url.split("://", 1)[0])[-1]
        methods.setdefault(method.lower(), method)  # a case-insensitive set, as classad::References
    return [methods[key] for key in sorted(methods)]


def _file_transfer_clause(ad: classad2.ClassAd, judged: set[str]) -> list[str]:
    """The clause that a slot can give the job its files: the submit machine's filesystem (NO), file transfer
    (YES; with a recent enough starter for checkpoint files, relative paths or ON_SUCCESS, and a plugin for each
    URL method), or either (IF_NEEDED). Sets WantTransferPluginMethods, as condor_submit does."""
    should = ad["ShouldTransferFiles"]
    if should == "NO":
        return [] if "filesystemdomain" in judged else [SAME_FILESYSTEM]
    methods = url_methods(ad)
    if methods:
        ad["WantTransferPluginMethods"] = ",".join(methods)
    if "hasfiletransfer" in judged:
        return []
    checks = ["TARGET.HasFileTransfer"]
    if ("TransferCheckpoint" in ad or ad.get("PreserveRelativePaths") is True
            or ad["WhenToTransferOutput"] == "ON_SUCCESS"):
        checks.append('versioncmp(split(TARGET.CondorVersion)[1], "8.9.7") >= 0')
    if "hasfiletransferpluginmethods" not in judged:
        checks += [f'stringListIMember("{method}", TARGET.HasFileTransferPluginMethods)' for method in methods]
    if should == "IF_NEEDED" and "filesystemdomain" not in judged:
        return [f"({SAME_FILESYSTEM} || ({' && '.join(checks)}))"]
    return [f"({' && '.join(checks)})"]


def set_rounded(ad: classad2.ClassAd, name: str, value: int):
    """Set a size the schedd rounds (DiskUsage, ExecutableSize, ResidentSetSize, ImageSize) as it stores it:
    rounded (htcondor_codes.schedd_rounded), and as given in <name>_RAW."""
    ad[f"{name}_RAW"] = value
    ad[name] = schedd_rounded(value)


def build_cluster(items: dict[str, str], procs: list[dict[str, str]], *, cluster: int,
                  submit_dir: str, owner: str, submit_environment: dict | None) -> list[classad2.ClassAd]:
    """All job ads of one submit; raises SubmitError before anything is queued."""
    if not procs:
        raise SubmitError("the submit queues no jobs (count 0 and no itemdata)")
    builder = ClusterBuilder(items, submit_dir=submit_dir, owner=owner,
                             submit_environment=submit_environment)
    return [builder.build(cluster, proc, variables) for proc, variables in enumerate(procs)]


def environment_of(ad: classad2.ClassAd) -> dict[str, str]:
    """The environment a job ad asks for."""
    return quoting.parse_raw_environment(ad.get("Environment", ""))


def arguments_of(ad: classad2.ClassAd) -> list[str]:
    """The argv (after the executable) a job ad asks for."""
    return quoting.parse_raw_arguments(ad.get("Arguments", ""))
