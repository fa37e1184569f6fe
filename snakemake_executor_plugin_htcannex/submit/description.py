"""A Snakemake job, as a plain `JobSpec`, -> an `htcondor2.Submit`.

The executor turns each Snakemake job into a `JobSpec`, places it (sites/placement.py, with the
request submit/request.py made once) and calls `build_submit(spec, decision, options)`. Nothing here
imports Snakemake.

Why the choices below (details in docs/sites.md, "From a job to a submit"):
- The command is kept as an argv: `executable` is argv[0] (a program on the
  execute node, so `transfer_executable = false`) and `arguments` uses
  HTCondor's new syntax, which quotes every element exactly (spaces, single
  and double quotes survive); no wrapper script is written.
- Values reach the submit language verbatim, so every value from a wildcard,
  param, config or resource is checked first (submit_language.py): no control
  characters, `$` kept literal, no secrets.
- No shared filesystem is assumed: inputs and the workflow sources go in
  `transfer_input_files`, outputs in `transfer_output_files`, and
  `preserve_relative_paths = true` keeps `results/run1/ckpt_3.pt` at that
  path both in the sandbox and back in the initial directory (without it
  HTCondor flattens every file to its basename).
- `when_to_transfer_output = ON_SUCCESS`: a chunk is atomic (it restarts from
  the previous checkpoint, an input), so nothing is saved from an eviction; and
  a failed command's Snakemake deletes its outputs, which under ON_EXIT would
  hold the job (output missing) instead of letting it terminate with its exit
  code. ON_SUCCESS is judged by `success_exit_code`, which must be set; that
  alone would switch on HTCondor's own retries (DEFAULT_JOB_MAX_RETRIES), and
  retries belong to Snakemake (a retry rotates to the next site), so
  `max_retries = 0` (the escape hatch may change it).
"""
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import classad2
import htcondor2
import yaml
from htcondor_codes import PARAM_DEFAULTS_S

from snakemake_executor_plugin_htcannex import paths

from snakemake_executor_plugin_htcannex.sites.placement import Decision
from snakemake_executor_plugin_htcannex.sites.site import ResourceRequest, Site, SiteKind
from snakemake_executor_plugin_htcannex.submit import output_directories, template, transfer_items, transfer_names
from snakemake_executor_plugin_htcannex.submit_language import (CONTAINER_IMAGE, ENV_NAME, SubmitValueError, ValueChecker,
                                                                extra_command, literal, needs_stand_in)

# A job's stdout/stderr file is named after its rule, which is any text for a group job or an unnamed
# rule: only these characters are kept (no '/', no space, nothing the submit language reads), and a
# group of many rules is cut short (the job id after it keeps the name unique).
FILE_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
FILE_STEM_CHARACTERS = 80


@dataclass(frozen=True)
class JobSpec:
    """One Snakemake job, in plain values (the executor builds it)."""

    # What messages call the job: its rule's name as the Snakefile says it (an unnamed rule's is a
    # number), or for a group job its rules and group (job_spec.rule_label); any text.
    rule: str
    jobid: int | str  # a group job's id is a UUID string
    argv: Sequence[str]  # argv[0]: the program, as found on the execute node
    wildcards: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, object] = field(default_factory=dict)
    threads: int = 1
    attempt: int = 1
    inputs: Sequence[str] = ()  # paths relative to the workdir, or osdf:// URLs
    outputs: Sequence[str] = ()  # paths relative to the workdir (or the sandbox, for remapped ones)
    # output (as listed in outputs) -> where HTCondor puts it instead: an osdf:// URL or a path
    output_remaps: Mapping[str, str] = field(default_factory=dict)
    environment: Mapping[str, str] = field(default_factory=dict)  # this job's; wins over the profile's
    ships_workflow_sources: bool = True  # False: the job runs no Snakemake and needs no Snakefile
    # The script direct_command.py prepared for the job (workdir-relative), named in its ad as
    # HtcannexPreparedScript: a restarted executor keeps it while the job is queued, removes it after.
    prepared_script: str | None = None
    # True: the job's command does not make its outputs' directories (no Snakemake in the job); they
    # are made for it (output_directories.py).
    needs_output_directories: bool = False
    # The one input (relative to the job's initial directory) that travels at the top of the sandbox, for the
    # job's shell to move to its path (transfer_items.py); None: every input keeps its path.
    flat_input: str | None = None
    # The rule's container (Snakemake's `container:` under --software-deployment-method apptainer), which
    # HTCondor's container universe runs the job in instead of the profile's image (direct_command.py).
    container_image: str | None = None
    # The rule's log files (workdir-relative), where a rule's shell often sends its command's stderr:
    # a failed job's message and `htcannex why` show their last lines (failure_hints.command_output).
    logs: Sequence[str] = ()


@dataclass(frozen=True)
class SubmitOptions:
    """What is the same for every job of a workflow run."""

    workdir: Path  # the job's initial directory; Snakemake's working directory (resolved)
    log_path: Path  # the one user event log, paths.event_log(workdir)
    shared_fs: bool = False  # campus pool with a shared filesystem: no file transfer
    container_image: str | None = None
    environment: Mapping[str, str] = field(default_factory=dict)
    extra_commands: Mapping[str, object] = field(default_factory=dict)  # htcannex.yaml's `submit:`
    workflow_sources: Sequence[str] = ()  # Snakefile, rules, scripts, config the job needs
    # A directory above workdir when sources or inputs lie outside it (`-s ../w/Snakefile`, a
    # module): the job's initialdir, so that every transferred path is below it and keeps its
    # place relative to the others in the sandbox; the job then starts in workdir's place there.
    transfer_root: Path | None = None
    # True on a real pool, where each item of a job's input transfer makes a 5-s wait before the job starts
    # likelier (transfer_items.py): the job's shell makes the output directories of a job without Snakemake
    # (output_directories.py) and moves a lone input file to its directory. False on the embedded pool, where
    # items cost nothing and a process in the job costs it a millisecond: the directories come as a tree.
    few_transfer_items: bool = False

    def __post_init__(self):
        # Resolved once per run, not per job (symbolic links followed: the paths jobs are judged by).
        object.__setattr__(self, "workdir", Path(self.workdir).resolve())
        if self.transfer_root is not None:
            object.__setattr__(self, "transfer_root", Path(self.transfer_root).resolve())

    @property
    def initial_dir(self) -> Path:
        return self.transfer_root or self.workdir

    @property
    def sandbox_workdir(self) -> str | None:
        """Where workdir is in the sandbox, relative to it; None when the sandbox is the workdir."""
        relative = self.workdir.relative_to(self.initial_dir)
        return None if relative == Path(".") else str(relative)

    @property
    def logs_dir(self) -> Path:
        """Where each job's stdout/stderr go; the executor creates it before submitting."""
        return paths.job_logs_dir(self.workdir)


def transfer_root(workdir: Path, paths: Sequence[str]) -> Path | None:
    """The directory the files of a run are transferred from: the workdir, or the nearest directory
    above it that holds every path too (SubmitOptions.transfer_root). Snakemake's own remote
    executors only ship sources under the workdir (Workflow.write_source_archive skips '../' ones)."""
    workdir = Path(workdir).resolve()
    files = [os.path.normpath(workdir / path) for path in paths if "://" not in str(path)]
    root = Path(os.path.commonpath([workdir, *files]))
    return None if root == workdir else root


def build_submit(spec: JobSpec, decision: Decision, options: SubmitOptions) -> htcondor2.Submit:
    """The submit description for `spec` where placement put it: at `decision.site` (None: any slot),
    asking for `decision.request`, the job's request as that site admitted it (submit/request.py made
    it once). Raises SubmitValueError for a value that cannot be submitted safely."""
    check = ValueChecker(spec.rule)
    site = decision.site
    # An MLDAG chunk's own submit description, filled for the site (template.py): its commands win.
    chunk_submit = decision.template
    commands = {}
    commands.update(_command(spec, options, check))
    commands.update(_resources(decision.request, site, check))
    commands.update(_files(spec, options, check))
    environment = {**options.environment, **spec.environment}
    if chunk_submit is not None:
        environment |= template.environment(chunk_submit, site)[0]
    if environment:
        commands["environment"] = _environment(environment, check)
    commands.update(_identity(spec, site, options, check))
    # Narrowest wins: the profile's, then the site's, then the rule's own.
    site_extras = site.submit_commands if site is not None else {}
    extras = {**options.extra_commands, **site_extras, **_rule_extras(spec, check)}
    for key, value in extras.items():
        name, text = extra_command(key, value, check)
        if name == "requirements" and "requirements" in commands:
            text = f"({commands['requirements']}) && ({text})"
        commands[name] = text
    if "transfer_checkpoint_files" in commands:
        # Named from where the job runs (its workdir), as HTCondor looks for them from the sandbox root.
        commands["transfer_checkpoint_files"] = template.in_sandbox_workdir(
            commands["transfer_checkpoint_files"], options.sandbox_workdir)
    if chunk_submit is not None:
        commands = template.merge(chunk_submit, commands, options.sandbox_workdir)
    return htcondor2.Submit(commands)


def quote_new_syntax(items: Sequence[str]) -> str:
    """HTCondor's new `arguments`/`environment` syntax for `items` (each already checked)."""

    def item(text: str) -> str:
        text = text.replace('"', '""')
        if text and not re.search(r"[\s']", text):
            return text
        return "'" + text.replace("'", "''") + "'"

    return '"' + " ".join(map(item, items)) + '"'


def _command(spec: JobSpec, options: SubmitOptions, check: ValueChecker) -> dict:
    if not spec.argv:
        raise SubmitValueError(spec.rule, "command", list(spec.argv), "the job has no command")
    argv = [check.text(f"command argument {index}", item) for index, item in enumerate(spec.argv)]
    image = spec.container_image or options.container_image
    commands = {}
    if image:
        image = check.text("container", image)
        if not CONTAINER_IMAGE.fullmatch(image):
            raise SubmitValueError(spec.rule, "container", image,
                                   "a container image is a path, an osdf:// URL or a docker:// reference, "
                                   "without spaces or commas")
        commands["universe"] = "container"
        commands["container_image"] = image
        if options.shared_fs and not image.startswith("docker://"):
            # condor_submit transfers an image unless told it is on a shared filesystem, and refuses that
            # transfer with should_transfer_files = NO (seen on a real 25.14.0 pool).
            if image.startswith("osdf://"):
                raise SubmitValueError(spec.rule, "container", image,
                                       "with --htcannex-shared-fs nothing is transferred, and an osdf:// image "
                                       "must be: give the image's path on the shared filesystem")
            commands["transfer_container"] = "false"
    else:
        commands["universe"] = "vanilla"
    commands["executable"] = argv[0]
    commands["transfer_executable"] = "false"
    if len(argv) > 1:
        commands["arguments"] = quote_new_syntax(argv[1:])
    stem = f"{FILE_NAME_UNSAFE.sub('_', spec.rule)[:FILE_STEM_CHARACTERS]}-{spec.jobid}-{spec.attempt}"
    commands["initialdir"] = check.text("workdir", options.initial_dir)
    commands["log"] = check.text("log", options.log_path)
    if ";" in str(options.logs_dir):
        # The shadow brings stdout and stderr back through remaps it writes unescaped ("_condor_stdout=<path>",
        # remoteresource.cpp AddDownloadFilenameRemap): a ';' in the path ends the rule there, and a real 25.13.2
        # pool wrote the job's stdout over the file named by the path's part before it.
        raise SubmitValueError(spec.rule, "workdir", str(options.workdir),
                               "HTCondor's shadow cannot bring a job's stdout and stderr back to a path with ';' "
                               "(it writes them to the path cut at the ';'): run from a directory without ';'")
    commands["output"] = check.text("output", options.logs_dir / f"{stem}.out")
    commands["error"] = check.text("error", options.logs_dir / f"{stem}.err")
    return commands


def _resources(request: ResourceRequest, site: Site | None, check: ValueChecker) -> dict:
    commands = {"request_cpus": str(request.cpus),
                # When the job ends the schedd keeps its claim this long for the user's next job, as DAGMan
                # does for its nodes: the next chunk handed over in that time (a chain's next link, Snakemake's
                # next job for the same slot) starts on it at the RESCHEDULE that htcondor2's submit sends
                # (waiting.py: or one more), without waiting for a negotiation cycle (schedd.cpp
                # FindRunnableJobForClaim).
                "keep_claim_idle": str(int(PARAM_DEFAULTS_S["DAGMAN_HOLD_CLAIM_TIME"]))}
    if request.memory_mb is not None:
        commands["request_memory"] = f"{request.memory_mb}MB"
    if request.disk_mb is not None:
        # request_disk's bare unit is KiB (unlike request_memory): always say MB.
        commands["request_disk"] = f"{request.disk_mb}MB"
    requirements = []
    if request.gpus:
        commands["request_gpus"] = str(request.gpus)
        if request.gpu_memory_mb:
            commands["gpus_minimum_memory"] = f"{request.gpu_memory_mb}MB"
        if request.gpu_capability:
            commands["gpus_minimum_capability"] = str(request.gpu_capability)
        if request.gpu_model:
            requirements.append(f'regexp("{request.gpu_model}", TARGET.GPUs_DeviceName, "i")')
    if site is not None and site.kind is SiteKind.ANNEX:
        # The annex's START checks TargetAnnexName, but other slots of the pool do not: this keeps
        # the chunk off them, so a hop really runs where the rotation put it. It refers to the
        # job's own TargetAnnexName so that retargeting a job (recovery.py) edits one attribute.
        requirements.append("(TARGET.AnnexName =?= MY.TargetAnnexName)")
    if site is not None and site.requirements:
        requirements.append(f"({site.requirements})")
    if requirements:
        commands["requirements"] = check.expression("requirements", " && ".join(requirements))
    if request.runtime_s is not None:
        commands["MY.JobDurationCategory"] = classad2.quote(request.duration_category)
        commands["allowed_execute_duration"] = str(request.runtime_s)
    return commands


def _files(spec: JobSpec, options: SubmitOptions, check: ValueChecker) -> dict:
    if options.shared_fs:
        if spec.needs_output_directories:
            output_directories.make_in_place(options.workdir, output_directories.of(spec.outputs))
        return {"should_transfer_files": "NO"}
    inputs = [check.path("input", path, options) for path in spec.inputs]
    sources = [check.path("workflow source", path, options)
               for path in (options.workflow_sources if spec.ships_workflow_sources else ())]
    outputs = [check.path("output file", path, options) for path in spec.outputs]
    for path, original in zip(outputs, spec.outputs):
        if "://" in path:
            raise SubmitValueError(spec.rule, "output file", original, "outputs come back as files; "
                                   "write URLs from the job (a storage plugin), not through file transfer")
    commands = {
        "should_transfer_files": "YES",
        "when_to_transfer_output": "ON_SUCCESS",
        "success_exit_code": "0",
        "max_retries": "0",
        "preserve_relative_paths": "true",
    }
    # Paths here; the submit language's text for each is literal(path).
    transfer_in = [transfer_items.listed(path, options.initial_dir) if path == spec.flat_input
                   else _listed_input(spec, path, options) for path in dict.fromkeys(inputs + sources)]
    made = output_directories.made_by(inputs + sources)
    directories = ([directory for directory in output_directories.of(outputs) if directory not in made]
                   if spec.needs_output_directories else [])
    if directories and output_directories.sent_as_tree(options.few_transfer_items, options.workdir):
        transfer_in.append(output_directories.transferred_tree(options.workdir, directories))
    if transfer_in:
        commands["transfer_input_files"] = ", ".join(map(literal, transfer_in))
    listed, stand_in_remaps = transfer_names.output_remaps(dict.fromkeys(outputs))
    if listed:
        commands["transfer_output_files"] = ", ".join(map(literal, listed))
    remaps = {**stand_in_remaps, **_checked_remaps(spec, outputs, options, check)}
    if remaps:
        commands["transfer_output_remaps"] = _remaps(spec, remaps)
    return commands


def _listed_input(spec: JobSpec, path: str, options: SubmitOptions) -> str:
    """`path` as transfer_input_files lists it: itself, or the stand-in it travels under (transfer_names.py)."""
    if "://" in path or not needs_stand_in(path):
        return path
    if os.path.isdir(os.path.join(options.initial_dir, path)):
        raise SubmitValueError(spec.rule, "input", path,
                               "HTCondor's transfer lists are comma separated and trim spaces at the ends of a "
                               "name, and a directory cannot travel under another name (HTCondor does not send a "
                               "link to a directory): rename the directory, or list the files in it as inputs")
    return transfer_names.make_input_link(path, options.workdir, options.initial_dir)


def _checked_remaps(spec: JobSpec, outputs: list[str], options: SubmitOptions, check: ValueChecker) -> dict:
    """The job's own output remaps (OSDF outputs), checked: output as listed -> destination."""
    remaps = {}
    for name, destination in spec.output_remaps.items():
        field = f"output remap {name!r}"
        source = check.path(field, name, options)
        if source not in outputs:
            raise SubmitValueError(spec.rule, field, name, "only a listed output can be remapped; add it to outputs")
        remaps[source] = check.path(field, destination, options)
    return remaps


def _remaps(spec: JobSpec, remaps: Mapping[str, str]) -> str:
    """`transfer_output_remaps`: "name = destination; ..." (transfer_names.remap_entry)."""
    entries = []
    for name, destination in remaps.items():
        try:
            entries.append(literal(transfer_names.remap_entry(name, destination)))
        except ValueError as error:
            raise SubmitValueError(spec.rule, f"output remap {name!r}", name, f"{error}; rename the file") from None
    return '"' + "; ".join(entries) + '"'


def _environment(environment: Mapping[str, str], check: ValueChecker) -> str:
    entries = []
    for name, value in environment.items():
        if not ENV_NAME.fullmatch(str(name)):
            raise SubmitValueError(check.rule, "environment", name, "an environment variable name is an identifier")
        entries.append(f"{name}={check.text(f'environment {name}', value)}")
    return quote_new_syntax(entries)


def job_signature(spec: JobSpec, options: SubmitOptions) -> str:
    """The same for every submission of one job (its rule and outputs) of one workflow directory, across
    Snakemake restarts (Snakemake's job ids and attempts are not): what a restarted executor looks for to
    re-adopt it, and what a memory hold's raised request is remembered by."""
    text = "\0".join([str(options.workdir), spec.rule, *sorted(spec.outputs)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


LOGS_ATTRIBUTE = "HtcannexLogs"  # the job ad's list of the rule's log files (JobSpec.logs)


def _identity(spec: JobSpec, site: Site | None, options: SubmitOptions, check: ValueChecker) -> dict:
    """Attributes that say which job this is and where it must run (read by `htcannex status`)."""
    wildcards = json.dumps({str(name): str(value) for name, value in spec.wildcards.items()})
    commands = {
        "MY.HtcannexRule": classad2.quote(check.text("rule", spec.rule)),
        "MY.HtcannexJobId": _job_id_value(spec.jobid),
        "MY.HtcannexAttempt": str(int(spec.attempt)),
        "MY.HtcannexWildcards": classad2.quote(check.text("wildcards", wildcards)),
        "MY.HtcannexSignature": classad2.quote(job_signature(spec, options)),
        # The slot's AnnexName in each execute event (the shadow writes the machine attributes a job
        # names here, remoteresource.cpp), so the event log says which annex every execution was on.
        "ulog_execute_attrs": "AnnexName",
    }
    if spec.logs:
        commands[f"MY.{LOGS_ATTRIBUTE}"] = classad2.quote(check.text("log", ", ".join(spec.logs)))
    if spec.prepared_script:
        commands["MY.HtcannexPreparedScript"] = classad2.quote(check.text("prepared script", spec.prepared_script))
    if site is not None:
        commands["MY.HtcannexSite"] = classad2.quote(site.name)
        if site.kind is SiteKind.ANNEX:
            commands["MY.TargetAnnexName"] = classad2.quote(site.annex_name)
    return commands


def _job_id_value(jobid: int | str) -> str:
    """A job's id as a ClassAd value: an integer, or a string for a group job (a UUID)."""
    if isinstance(jobid, int):
        return str(jobid)
    return classad2.quote(str(jobid))


def _rule_extras(spec: JobSpec, check: ValueChecker) -> Mapping[str, object]:
    """The rule's `htcannex_submit` resource: a mapping, or a string holding one (Snakemake
    resources cannot be dicts), e.g. htcannex_submit='{"+WantGPULab": true}'."""
    extras = spec.resources.get("htcannex_submit")
    if extras is None:
        return {}
    if isinstance(extras, str):
        try:
            extras = yaml.safe_load(extras)
        except yaml.YAMLError:
            extras = None
    if not isinstance(extras, Mapping):
        raise SubmitValueError(check.rule, "resources.htcannex_submit", spec.resources["htcannex_submit"],
                               'must be a mapping of submit commands, e.g. \'{"max_retries": 2}\'')
    return extras
