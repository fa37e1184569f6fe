"""Values on their way into a submit description: what is refused, and the escape hatch's tables.

The submit language is line based and expands `$(...)` macros, so every value from a wildcard,
param, config or resource is checked (`ValueChecker`): control characters are refused (a newline
would start a new submit command), `$` is written so that no macro expands (`literal`), secrets never go in, paths are
transfer-list safe, expressions parse. The `htcannex_submit` escape hatch (a rule's resource, the
catalogue's `submit:`) may set only the keywords listed here, never one htcannex sets itself, nor
(as `+Attr` / `MY.Attr`) a job-ad attribute htcannex or HTCondor's schedd owns (`owned_attribute`).
Used by submit/description.py for jobs, by the catalogue loader for `submit:` and by the driver's
submit description: a base module, below all of them.
"""
import os
import re
from pathlib import Path, PurePosixPath
from typing import Protocol

import classad2

from snakemake_executor_plugin_htcannex.secrets import contains_secret, redact, secret_values


def needs_stand_in(name: str) -> bool:
    """Whether `name` cannot be an item of HTCondor's comma-separated transfer lists."""
    return "," in name or name != name.strip()


class Directories(Protocol):
    """Where a job's files are named from (submit.description.SubmitOptions has both)."""

    workdir: Path  # the workflow's working directory
    initial_dir: Path  # the job's initialdir: workdir, or a directory above it


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CUSTOM_ATTRIBUTE = re.compile(r"(?:MY\.|\+)(?P<name>[A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
GPU_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _-]*")
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
CONTAINER_IMAGE = re.compile(r"(?:osdf://|docker://)?[^\s,]+")

# Submit keywords the `htcannex_submit` escape hatch may set. Those htcannex
# sets itself are left out on purpose (see OWNED_BY_RESOURCE).
EXTRA_KEYWORDS = frozenset({
    "accounting_group", "accounting_group_user", "allowed_job_duration", "batch_name",
    "checkpoint_exit_code", "concurrency_limits", "container_service_names", "container_target_dir",
    "cuda_version", "gpus_maximum_capability", "gpus_minimum_runtime", "job_machine_attrs",
    "job_max_vacate_time", "max_retries", "max_transfer_input_mb", "max_transfer_output_mb",
    "notification", "notify_user", "on_exit_hold", "on_exit_remove", "periodic_hold",
    "periodic_release", "periodic_remove", "priority", "rank", "require_gpus", "requirements",
    "retry_until", "starter_debug", "stream_error", "stream_output", "success_exit_code",
    "transfer_checkpoint_files", "want_graceful_removal",
})
EXPRESSION_KEYWORDS = frozenset({
    "on_exit_hold", "on_exit_remove", "periodic_hold", "periodic_release", "periodic_remove",
    "rank", "require_gpus", "requirements", "retry_until",
})
OWNED_BY_RESOURCE = {
    "universe": "the container image", "container_image": "the rule's container or the profile",
    "executable": "the job's command", "arguments": "the job's command", "environment": "the profile's environment",
    "request_cpus": "threads", "request_memory": "mem_mb / mem", "request_disk": "disk_mb / disk",
    "request_gpus": "gpu", "gpus_minimum_memory": "gpu_memory", "gpus_minimum_capability": "gpu_capability",
    "allowed_execute_duration": "runtime", "log": "htcannex (one event log)", "output": "htcannex",
    "error": "htcannex", "initialdir": "htcannex", "transfer_input_files": "the rule's input",
    "transfer_output_files": "the rule's output", "should_transfer_files": "the shared-fs setting",
    "transfer_container": "the shared-fs setting",
    "when_to_transfer_output": "htcannex", "preserve_relative_paths": "htcannex",
    "transfer_executable": "htcannex", "transfer_output_remaps": "the job's output remaps",
}
def _owner_of_command(command: str) -> str:
    source = OWNED_BY_RESOURCE[command]
    if source.startswith("htcannex"):
        return f"{source}, through submit command {command}; leave it out"
    return f"htcannex (submit command {command}) from {source}; set that instead"


# The job-ad attributes the owned commands (and htcannex's own requirements, stdin and event-log
# settings) become, as HTCondor's submit names them (condor_attributes.h, submit_utils.cpp): a
# `+Attr` / `MY.Attr` naming one would replace what htcannex set, so the escape hatch refuses them too.
COMMAND_ATTRIBUTES = {
    "universe": ("JobUniverse", "WantContainer"), "container_image": ("ContainerImage",),
    "transfer_container": ("TransferContainer",), "executable": ("Cmd",),
    "arguments": ("Args", "Arguments"), "environment": ("Env", "Environment"),
    "request_cpus": ("RequestCpus",), "request_memory": ("RequestMemory",), "request_disk": ("RequestDisk",),
    "request_gpus": ("RequestGPUs",), "gpus_minimum_memory": ("GPUsMinMemory",),
    "gpus_minimum_capability": ("GPUsMinCapability",), "allowed_execute_duration": ("AllowedExecuteDuration",),
    "log": ("UserLog",), "output": ("Out",), "error": ("Err",), "initialdir": ("Iwd",),
    "transfer_input_files": ("TransferInput",), "transfer_output_files": ("TransferOutput",),
    "should_transfer_files": ("ShouldTransferFiles",), "when_to_transfer_output": ("WhenToTransferOutput",),
    "preserve_relative_paths": ("PreserveRelativePaths",), "transfer_executable": ("TransferExecutable",),
    "transfer_output_remaps": ("TransferOutputRemaps",),
}
OWNED_ATTRIBUTES = {
    **{attribute.lower(): _owner_of_command(command) for command, attributes in COMMAND_ATTRIBUTES.items()
       for attribute in attributes},
    "requirements": "htcannex from the rule's resources and the site; add a clause with the plain "
                    "`requirements` command instead, which htcannex ANDs with its own",
    **dict.fromkeys(("in", "transferin"), "htcannex (a job reads no stdin); make the file an input and open it"),
    "userlogexecuteeventattrs": "htcannex (its one event log); leave it out",
    "targetannexname": "htcannex from the rotation; choose sites in htcannex.yaml instead",
    # Not JobDurationCategory: OSPool's advisory category, which htcannex fills from `runtime` unless
    # the user names one (an MLDAG template does too).
    # Set by the schedd when the job is queued.
    **dict.fromkeys(("clusterid", "procid", "globaljobid", "owner", "user", "qdate", "jobstatus",
                     "enteredcurrentstatus"), "HTCondor's schedd; choose another name"),
}
OWNED_ATTRIBUTE_PREFIX = "htcannex"


def owned_attribute(name: str) -> str | None:
    """Who sets job-ad attribute `name` (any letter case) when htcannex or HTCondor does, else None."""
    name = name.lower()
    if name.startswith(OWNED_ATTRIBUTE_PREFIX):
        return "htcannex (it identifies the job); choose another name"
    return OWNED_ATTRIBUTES.get(name)


# What follows a `$` in a submit value decides whether HTCondor reads a macro there (config.cpp,
# next_config_macro): `$(`, `$Name(` at submit, `$$(` when the job is matched.
SUBMIT_MACRO_AFTER = re.compile(r"[A-Za-z0-9_]*\(")
DOLLAR_MACRO_AFTER = re.compile(r"\(DOLLAR\)", re.IGNORECASE)


def literal(text: str) -> str:
    """`text` written so that the job sees it unchanged through both of HTCondor's expansions.

    condor_submit expands `$(Name)` and `$Name(...)` macros, then turns each `$(DOLLAR)` into `$`;
    the schedd expands `$$(Name)` against the slot when the job is matched, and `$$(DOLLARDOLLAR)`
    into `$$` (qmgmt.cpp; docs/pool.md, fidelity). Both read `$` signs in pairs from the left, so
    each pair or single `$` is written on its own (re.sub's left-to-right matching pairs the same):
    - `$$` before `(` as `$$(DOLLARDOLLAR)`, any other `$$` as it is (no macro can start there);
    - `$` before `(DOLLAR)` as `$$(["$"])`: `$(DOLLAR)` there would be read again after its
      expansion, as `$(DOLLAR)`, and end as a single `$` (condor_submit rescans from the `$`);
    - `$` before `Name(` or `(` as `$(DOLLAR)`, any other `$` as it is.
    """

    def written(match: re.Match) -> str:
        after = match.end()
        if match.group() == "$$":
            return "$$(DOLLARDOLLAR)" if text.startswith("(", after) else "$$"
        if DOLLAR_MACRO_AFTER.match(text, after):
            return '$$(["$"])'
        return "$(DOLLAR)" if SUBMIT_MACRO_AFTER.match(text, after) else "$"

    return re.sub(r"\$\$|\$", written, text)


class SubmitValueError(ValueError):
    """A value that cannot go into a submit description; names rule, field and value."""

    def __init__(self, rule: str, field: str, value: object, why: str):
        self.rule, self.field, self.value, self.why = rule, field, value, why
        super().__init__(redact(f"rule {rule}: {field} = {value!r}: {why}"))


class ValueChecker:
    """Checks values for one rule; every refusal names the rule, the field and the value."""

    def __init__(self, rule: str):
        self.rule = rule
        # Looked up once per job rather than once per value (~20 a job).
        self._secrets = secret_values()

    def text(self, field: str, value: object) -> str:
        """`value` as submit-language text: one line, `$` kept literal."""
        text = str(value)
        if contains_secret(text, self._secrets):
            raise SubmitValueError(self.rule, field, value,
                                   "holds a secret (a token or password): a submit description is kept in the "
                                   "queue and the history, readable by others; give the job a token file instead "
                                   "(BEARER_TOKEN_FILE, use_oauth_services)")
        if CONTROL_CHARACTERS.search(text):
            raise SubmitValueError(self.rule, field, value,
                                   "control characters (newline, tab, NUL...) cannot go into a submit description; "
                                   "a newline would start a new submit command")
        return literal(text)

    def path(self, field: str, value: str, options: Directories) -> str:
        """A file to transfer, relative to the job's initial directory (osdf:// URLs pass as they are);
        a relative `value` is relative to the workdir. Checked as `text` is, and returned as a path (the
        submit language's text for it is `literal(path)`)."""
        self.text(field, value)
        text = str(value)
        if not text:
            raise SubmitValueError(self.rule, field, value, "an empty file name")
        if text.startswith("osdf://"):
            if needs_stand_in(text):
                raise SubmitValueError(self.rule, field, value,
                                       "HTCondor's transfer lists are comma separated, and a URL cannot travel under "
                                       "another name: an OSDF object's name cannot contain a comma or start or end "
                                       "with a space; rename the object")
            return text
        if "://" in text:
            raise SubmitValueError(self.rule, field, value, "only osdf:// URLs can be transferred by htcannex")
        where = PurePosixPath(options.workdir) / text
        try:
            path = PurePosixPath(os.path.normpath(where)).relative_to(PurePosixPath(options.initial_dir))
        except ValueError:
            raise SubmitValueError(self.rule, field, value,
                                   f"without a shared filesystem only files under the workdir, or under "
                                   f"{options.initial_dir} with the workflow's sources, travel with the job; move the "
                                   "file there, use osdf:// storage, or enable shared-fs mode") from None
        # A trailing slash is kept as written: without preserve_relative_paths it means "the directory's
        # contents"; with it (htcannex sets it outside shared-fs) HTCondor ignores it on a relative path
        # (htcondor-jdl.rst; docs/pool.md).
        return str(path) + ("/" if text.endswith("/") and path.parts else "")

    def expression(self, field: str, value: object) -> str:
        text = self.text(field, value)
        try:
            classad2.ExprTree(text)
        except Exception:  # classad2 raises classad2_impl.ClassAdException
            raise SubmitValueError(self.rule, field, value, "is not a ClassAd expression") from None
        return text


def check_extra_command(key: object, value: object) -> None:
    """Raise SubmitValueError unless `key: value` may pass the escape hatch (for the catalogue loader)."""
    extra_command(key, value, ValueChecker("(any)"))


def extra_command(key: object, value: object, check: ValueChecker) -> tuple[str, str]:
    """One escape-hatch command, validated: (submit key, submit value)."""
    field = f"htcannex_submit[{key!r}]"
    if not isinstance(value, (str, int, float, bool)):
        raise SubmitValueError(check.rule, field, value, "a submit value is a string, number or boolean")
    literal = str(value).lower() if isinstance(value, bool) else value
    if isinstance(key, str) and (custom := CUSTOM_ATTRIBUTE.fullmatch(key)):
        name = custom["name"]
        if owner := owned_attribute(name):
            raise SubmitValueError(check.rule, field, value,
                                   f"the escape hatch cannot set job attribute {name}: it is set by {owner}")
        text = check.text(field, literal)
        return f"MY.{name}", classad2.quote(text) if isinstance(value, str) else text
    keyword = str(key).lower()
    if keyword in OWNED_BY_RESOURCE:
        raise SubmitValueError(check.rule, field, value,
                               f"{keyword} is set by htcannex from {OWNED_BY_RESOURCE[keyword]}; set that instead")
    if keyword not in EXTRA_KEYWORDS:
        raise SubmitValueError(check.rule, field, value,
                               f"{key!r} is not a submit command htcannex passes through; use one of "
                               f"{', '.join(sorted(EXTRA_KEYWORDS))}, or a custom attribute MY.Name / +Name")
    if keyword in EXPRESSION_KEYWORDS:
        return keyword, check.expression(field, literal)
    return keyword, check.text(field, literal)
