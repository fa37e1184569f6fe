"""MLDAG's submit template: the user's own submit description, honoured as condor_submit would.

An MLDAG experiment (docs/mldag.md) gives a whole submit description with `$(var)` macros,
`{resource.*}` placeholders for the site a chunk lands on, and `if defined ... endif` blocks.
For each chunk htcannex fills the placeholders for the site the chunk lands on (`resource_values`:
the site's catalogue entry, an MLDAG resources.yaml laid over it, and the job's own Snakemake
resources, the profile's default-resources among them, for a name neither gives), puts the chunk's
VARS before the template as DAGMan does, and lets `htcondor2.Submit` parse the result (it evaluates
`if defined`; `$(var)` is expanded at submit). A `$(var)` nothing defines is refused (`undefined_macros`).
The template's commands then win over htcannex's own, except what htcannex must own (`OWNED`:
the event log, the job's stdout/stderr, its command and initial directory; a `+Attr` naming a job
attribute htcannex or HTCondor owns is refused, as from the escape hatch: submit_language.owned_attribute);
`requirements` are ANDed with htcannex's, transfer lists joined, request_* checked against the
site before anything is submitted, and secret-named variables in `environment` withheld.
"""
import difflib
import json
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import htcondor2
import yaml

from snakemake_executor_plugin_htcannex import secrets
from snakemake_executor_plugin_htcannex.sites.site import Admission, ResourceRequest, Site
from snakemake_executor_plugin_htcannex.submit_language import CONTROL_CHARACTERS, owned_attribute
from snakemake_executor_plugin_htcannex.submit_language import ENV_NAME as NAME  # a macro name is an identifier, as a variable's
from snakemake_executor_plugin_htcannex.units import UnitError, parse_size_mib

RESOURCE = "htcannex_template"  # the rule resource that carries a chunk's template (JSON, see encode)
PLACEHOLDER = re.compile(r"\{resource\.([A-Za-z_][A-Za-z0-9_]*)\}")
# $(ResourceName) in the chunk's command: the command is written before the chunk is placed, so it
# reads the site from the job's environment, where the executor puts it (`environment`); MLDAG's
# value where no site is chosen is "default".
SITE_VARIABLE = "HTCANNEX_SITE"
SITE_IN_COMMAND = '"${%s:-default}"' % SITE_VARIABLE
SITE_TO_BE_PLACED = "@@HTCANNEX_SITE@@"  # $(ResourceName) in a command written before placement
# A $(name) reference; $(name:default) has its own default, $ENV(...) and $F(...) are functions.
MACRO_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.]*)\)")
# What condor_submit defines without the submit file (submit_utils.cpp, SubmitMacroDefaults; Item
# for a queue loop), and DOLLAR, which `parse` writes for a `$` in a VAR's value.
HTCONDOR_MACROS = ("ARCH", "Cluster", "ClusterId", "Day", "IsLinux", "IsWindows", "ItemIndex", "JobId", "JobListId",
                   "Month", "Node", "OPSYS", "OPSYSANDVER", "OPSYSMAJORVER", "OPSYSVER", "Process", "ProcId",
                   "Request_CPUs", "Request_Memory", "Row", "SPOOL", "Step", "SUBMIT_FILE", "SUBMIT_TIME",
                   "VM_MEMORY", "VM_VCPUS", "Year", "Item", "DOLLAR")
# {resource.*} a chunk's own Snakemake resources give where neither the catalogue nor resources.yaml
# does (the profile's default-resources among them): MLDAG's name -> (Snakemake's, how to write it).
# disk is written with its unit: request_disk's bare number is KiB (HTCondor's manual).
DEFAULT_RESOURCES = {"disk": ("disk_mb", "{}MB"), "mem_mb": ("mem_mb", "{}"), "gpus": ("gpu", "{}"),
                     "gpu_memory": ("gpu_memory", "{}")}
OWNED = {
    "log": "htcannex's one event log",
    "output": "htcannex (it reports a failed job's stderr from its own file)",
    "error": "htcannex (it reports a failed job's stderr from its own file)",
    "executable": "the chunk's command (the template's executable and arguments, run by rule train_chunk)",
    "arguments": "the chunk's command (the template's executable and arguments, run by rule train_chunk)",
    "initialdir": "htcannex (the run's working directory)",
}
JOINED_LISTS = ("transfer_input_files", "transfer_output_files")
# request_* commands -> ResourceRequest fields, in MiB for sizes (HTCondor's units, units.py).
REQUESTS = {
    "request_cpus": "cpus", "request_memory": "memory_mb", "request_disk": "disk_mb", "request_gpus": "gpus",
    "gpus_minimum_memory": "gpu_memory_mb", "gpus_minimum_capability": "gpu_capability",
}


class TemplateError(ValueError):
    """A template htcannex cannot submit for a site; the message names the command and the site."""


@dataclass(frozen=True)
class ChunkTemplate:
    """What the workflow hands the executor for one chunk (the rule's htcannex_template resource)."""

    text: str
    vars: Mapping[str, object]  # the chunk's VARS as MLDAG gives them, but ResourceName
    resources: Mapping[str, Mapping]  # an MLDAG resources.yaml: site -> {name: value}
    # The Experiment.yaml the text is from: the resource names it instead of carrying the text,
    # which Snakemake prints with the job (an `environment` in it may hold a secret).
    file: str | None = None
    # {resource.*} for names no site gives, from the job's Snakemake resources (`of`).
    defaults: Mapping[str, object] = field(default_factory=dict)

    def encode(self) -> str:
        source = {"file": self.file} if self.file else {"template": self.text}
        return json.dumps(source | {"vars": dict(self.vars), "resources": dict(self.resources)})

    @classmethod
    def decode(cls, text: str) -> "ChunkTemplate":
        data = json.loads(text)
        if "file" in data:
            data["template"] = yaml.safe_load(Path(data["file"]).read_text())["submit_template"]
        return cls(data["template"], data["vars"], data["resources"], data.get("file"))


def catalogue_values(site: Site) -> dict:
    """{resource.*} of `site` from its catalogue entry, under MLDAG's names."""
    values = {"name": site.name, "cpus": site.cpus, "mem_mb": site.memory_mb, "gpus": site.gpus,
              # A CPU-only site has no GPU memory: 0, as its gpus.
              "gpu_memory": site.gpu_memory_mb if site.gpus else 0, "gpu_type": site.gpu_type, "gpu_capability": site.gpu_capability,
              "disk": f"{site.disk_mb}MB" if site.disk_mb is not None else None,
              "queue": site.queue, "lifetime": site.lifetime_s, "allocation": site.project, "login_name": site.login}
    return {name: value for name, value in values.items() if value is not None}


def resource_values(site: Site, resources: Mapping[str, Mapping], defaults: Mapping[str, object] = {}) -> dict:
    """{resource.*} of `site`: the job's own resources (`defaults`) for what nothing else gives, its
    catalogue entry over them, and resources.yaml's entry for the site over both."""
    return dict(defaults) | catalogue_values(site) | dict(resources.get(site.name, {}))


def default_values(resources: Mapping[str, object]) -> dict:
    """{resource.*} from a job's Snakemake resources (DEFAULT_RESOURCES)."""
    return {name: form.format(resources[key]) for name, (key, form) in DEFAULT_RESOURCES.items()
            if resources.get(key) not in (None, 0) and not str(resources[key]).startswith("<TBD")}


def parse(chunk: ChunkTemplate, site: Site | None, source: str = "submit_template") -> htcondor2.Submit:
    """The chunk's submit description: placeholders filled for `site` (left as they are for None),
    VARS defined first (with ResourceName), parsed by htcondor2.Submit."""
    text = chunk.text
    if site is not None:
        values = resource_values(site, chunk.resources, chunk.defaults)

        def fill(match):
            if match[1] not in values:
                raise TemplateError(f"{source}: {match[0]} is not known for site {site.name}; it has "
                                    f"{', '.join('{resource.' + n + '}' for n in values)}. {missing_fix(match[1])}")
            return str(values[match[1]])

        text = PLACEHOLDER.sub(fill, text)
    # ResourceName: the site, or MLDAG's "default" where none is chosen (as SITE_IN_COMMAND reads it).
    macros = {"ResourceName": "default"} | dict(chunk.vars) | ({"ResourceName": site.name} if site is not None else {})
    lines = []
    for name, value in macros.items():
        if not NAME.fullmatch(str(name)) or CONTROL_CHARACTERS.search(str(value)):
            raise TemplateError(f"{source}: VAR {name} = {value!r} cannot be a submit macro: a name is an "
                                "identifier and a value one line")
        lines.append(f"{name} = {str(value).replace('$', '$(DOLLAR)')}")
    try:
        return htcondor2.Submit("\n".join(lines) + "\n" + text)
    except Exception as error:  # htcondor2 raises HTCondorException for a description it cannot parse
        raise TemplateError(f"{source}: HTCondor cannot parse it: {error}") from None


def missing_fix(name: str) -> str:
    """Where a {resource.NAME} no site knows can come from, in the order they are looked up."""
    default = next((f" or default-resources {key} in the profile" for mldag, (key, _) in DEFAULT_RESOURCES.items()
                    if mldag == name), "")
    return (f"Give it as `{name}:` in the sites' catalogue entries (htcannex.yaml), in --resources "
            f"resources.yaml (`SITE: {{{name}: ...}}`){default}")


def unknown_everywhere(text: str, sites: list[Site], resources: Mapping[str, Mapping],
                       defaults: Mapping[str, object], source: str = "submit_template") -> None:
    """Refuse a {resource.*} that no site of the chunks' rotation has a value for, once, instead of
    one refusal per site and chunk."""
    for name in dict.fromkeys(PLACEHOLDER.findall(text)):
        if sites and all(name not in resource_values(site, resources, defaults) for site in sites):
            raise TemplateError(f"{source}: {{resource.{name}}} is known at no site the chunks can go to "
                                f"({', '.join(site.name for site in sites)}). {missing_fix(name)}")


def undefined_macros(text: str, defined: Mapping[str, object], source: str = "submit_template") -> None:
    """Refuse a `$(name)` in the template that nothing defines: not a var or VAR of the chunk
    (`defined`), not a command of the template itself, not a macro condor_submit defines. HTCondor
    would expand it to nothing, and the job would run with an empty argument."""
    commands = {line.split("=", 1)[0].strip().removeprefix("+").casefold() for line in text.splitlines()
                if "=" in line and NAME.fullmatch(line.split("=", 1)[0].strip().removeprefix("+").replace(".", "_"))}
    known = {name.casefold(): name for name in (*defined, "ResourceName", *HTCONDOR_MACROS)}
    for number, line in enumerate(text.splitlines(), start=1):
        for name in MACRO_REFERENCE.findall(line):
            if name.casefold() in known or name.casefold() in commands:
                continue
            near = difflib.get_close_matches(name, [*defined, "ResourceName"], n=1)
            raise TemplateError(
                f"{source}: submit_template line {number} ({line.strip()}): $({name}) is defined nowhere: not a "
                f"var ({', '.join(defined) or 'none'}), not one of MLDAG's VARS, not a command of the template, "
                "not a macro HTCondor defines; HTCondor would make it empty. "
                + (f"Did you mean $({near[0]})? " if near else "") + f"Add {name} to vars, or fix the name")


def command(submit: htcondor2.Submit, source: str = "submit_template") -> list[str]:
    """The template's executable and arguments, macros expanded, as an argv.

    `arguments` in HTCondor's new syntax ("..." with '' quoting) or the old one (split on spaces)."""
    if "executable" not in submit:
        raise TemplateError(f"{source}: no executable; the template's executable and arguments are the training command")
    arguments = submit.expand("arguments") if "arguments" in submit else ""
    if arguments.startswith('"') and arguments.endswith('"'):
        argv = shlex.split(arguments[1:-1].replace('""', '"'))
    else:
        argv = arguments.split()
    return [submit.expand("executable"), *argv]


def shell_command(argv: list[str]) -> str:
    """`argv` as one shell command line, each word quoted, $(ResourceName) (SITE_TO_BE_PLACED)
    read from the job's environment where the chunk runs (SITE_IN_COMMAND)."""
    return " ".join(SITE_IN_COMMAND.join(shlex.quote(part) for part in word.split(SITE_TO_BE_PLACED))
                    if SITE_TO_BE_PLACED in word else shlex.quote(word) for word in argv)


def requested(submit: htcondor2.Submit, request: ResourceRequest, site: Site | None, rule: str) -> ResourceRequest:
    """`request` with the template's request_* commands laid over it, admitted at `site`. A refusal
    names the command to blame where there is one (the rest of the request passes, that command
    alone does not), else it is the site's own words (a runtime longer than the lifetime is no
    command's fault)."""
    commands = {}  # key -> (its text, the field and value it sets)
    for key, field in REQUESTS.items():
        if key not in submit:
            continue
        text = submit.expand(key)
        try:
            if field in ("memory_mb", "disk_mb", "gpu_memory_mb"):
                # request_disk's bare number is KiB, the others' MiB (HTCondor's manual).
                value = parse_size_mib(text + ("KB" if field == "disk_mb" and text.isdecimal() else ""), field=key)
            else:
                value = float(text) if field == "gpu_capability" else int(text)
        except (UnitError, ValueError):
            raise TemplateError(f"submit_template command {key} = {text}: not a {field.replace('_', ' ')} "
                                f"(rule {rule})") from None
        commands[key] = (text, field, value)
    laid = replace(request, **{field: value for _, field, value in commands.values()})
    if site is None:
        return laid
    refusal = site.admit(laid, rule=rule).refusal
    if refusal is None:
        return laid
    if site.admit(request, rule=rule).refusal is None:
        for key, (text, field, value) in commands.items():
            if (alone := site.admit(replace(request, **{field: value}), rule=rule).refusal) is not None:
                raise TemplateError(f"submit_template command {key} = {text} contradicts site {site.name}: {alone}")
    raise TemplateError(refusal)


def admission(chunk: ChunkTemplate, request: ResourceRequest, rule: str) -> Callable[[Site | None], Admission]:
    """Each site's verdict on the chunk, whose request depends on the site (placement.place judges
    it so): the template filled for that site, its request_* over `request`, and the filled template
    with an admission (build_submit merges it). A site the template contradicts, or that has no value
    for one of its {resource.*}, refuses it with that reason. None: any slot, placeholders unfilled."""

    def at(site: Site | None) -> Admission:
        try:
            submit = parse(chunk, site)
            asked = requested(submit, request, site, rule)
        except TemplateError as error:
            return Admission(None, str(error))
        admitted = site.admit(asked, rule=rule) if site is not None else Admission(asked)
        return admitted if admitted.refusal is not None else replace(admitted, template=submit)

    return at


def environment(submit: htcondor2.Submit, site: Site | None = None) -> tuple[dict, list[str]]:
    """The template's environment (HTCondor's new syntax, macros expanded) without secret-named
    variables, and the names withheld (secrets.withheld_warning says how to pass a token file
    instead); with the chunk's site as SITE_VARIABLE, which its command reads for $(ResourceName)."""
    site_variable = {SITE_VARIABLE: site.name} if site is not None else {}
    if "environment" not in submit:
        return site_variable, []
    text = submit.expand("environment").strip()
    if text.startswith('"') and text.endswith('"'):
        text = text[1:-1].replace('""', '"')
    kept, withheld = secrets.withhold(dict(item.split("=", 1) for item in shlex.split(text) if "=" in item))
    return kept | site_variable, withheld


def merge(submit: htcondor2.Submit, commands: dict, sandbox_workdir: str | None = None) -> dict:
    """htcannex's `commands` with the template's laid over them (but its requests, in `requested`,
    and its environment, in `environment`). The template's transfer lists name files relative to the
    working directory, as in a submit file there; `sandbox_workdir` is where that directory is
    relative to the job's initialdir (SubmitOptions.sandbox_workdir)."""
    merged = dict(commands)
    for key, value in submit.items():
        name = key.lower()
        if name.startswith("my.") and (owner := owned_attribute(name[3:])):
            raise TemplateError(f"submit_template command {key}: job attribute {key[3:]} is set by {owner}")
        if name in OWNED or name in REQUESTS or name == "environment":
            continue
        existing = next((k for k in merged if k.lower() == name), None)
        if name in JOINED_LISTS:
            value = in_sandbox_workdir(value, sandbox_workdir)
        if name == "requirements" and existing:
            merged[existing] = f"({merged[existing]}) && ({value})"
        elif name in JOINED_LISTS and existing:
            merged[existing] = f"{merged[existing]}, {value}"
        else:
            merged.pop(existing, None)
            merged[key] = value
    return merged


def in_sandbox_workdir(files: str, sandbox_workdir: str | None) -> str:
    """A transfer list of files named relative to the working directory, relative to the job's
    initialdir instead (SubmitOptions.sandbox_workdir; URLs and absolute paths stay)."""
    if not sandbox_workdir:
        return files
    items = (item.strip() for item in files.split(","))
    return ", ".join(item if "://" in item or item.startswith("/") else f"{sandbox_workdir}/{item}"
                     for item in items if item)


def of(resources: Mapping) -> ChunkTemplate | None:
    """The chunk's template, if the rule gave one (resource htcannex_template), with the job's
    other resources as its {resource.*} defaults."""
    text = resources.get(RESOURCE)
    return replace(ChunkTemplate.decode(text), defaults=default_values(resources)) if text else None
