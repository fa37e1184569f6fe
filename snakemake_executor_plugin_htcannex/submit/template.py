"""MLDAG's submit template: the user's own submit description, honoured as condor_submit would.

An MLDAG experiment (docs/mldag.md) gives a whole submit description with `$(var)` macros,
`{resource.*}` placeholders for the site a chunk lands on, and `if defined ... endif` blocks.
For each chunk htcannex fills the placeholders from the site's catalogue entry (and an MLDAG
resources.yaml laid over it), puts the chunk's VARS before the template as DAGMan does, and lets
`htcondor2.Submit` parse the result (it evaluates `if defined`; `$(var)` is expanded at submit).
The template's commands then win over htcannex's own, except what htcannex must own (`OWNED`:
the event log, the job's stdout/stderr, its command and initial directory; a `+Attr` naming a job
attribute htcannex or HTCondor owns is refused, as from the escape hatch: submit_values.owned_attribute);
`requirements` are ANDed with htcannex's, transfer lists joined, request_* checked against the
site before anything is submitted, and secret-named variables in `environment` withheld.
"""
import json
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import htcondor2
import yaml

from snakemake_executor_plugin_htcannex import secrets
from snakemake_executor_plugin_htcannex.sites.site import Admission, ResourceRequest, Site, SiteRefusal
from snakemake_executor_plugin_htcannex.submit.values import CONTROL_CHARACTERS, owned_attribute
from snakemake_executor_plugin_htcannex.submit.values import ENV_NAME as NAME  # a macro name is an identifier, as a variable's
from snakemake_executor_plugin_htcannex.units import UnitError, parse_size_mib

RESOURCE = "htcannex_template"  # the rule resource that carries a chunk's template (JSON, see encode)
PLACEHOLDER = re.compile(r"\{resource\.([A-Za-z_][A-Za-z0-9_]*)\}")
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

    def encode(self) -> str:
        source = {"file": self.file} if self.file else {"template": self.text}
        return json.dumps(source | {"vars": dict(self.vars), "resources": dict(self.resources)})

    @classmethod
    def decode(cls, text: str) -> "ChunkTemplate":
        data = json.loads(text)
        if "file" in data:
            data["template"] = yaml.safe_load(Path(data["file"]).read_text())["submit_template"]
        return cls(data["template"], data["vars"], data["resources"], data.get("file"))


def resource_values(site: Site, resources: Mapping[str, Mapping]) -> dict:
    """{resource.*} of `site`: its catalogue entry under MLDAG's names, then resources.yaml's entry."""
    values = {"name": site.name, "cpus": site.cpus, "mem_mb": site.memory_mb, "gpus": site.gpus,
              "gpu_memory": site.gpu_memory_mb, "gpu_type": site.gpu_type, "gpu_capability": site.gpu_capability,
              "queue": site.queue, "lifetime": site.lifetime_s, "allocation": site.project, "login_name": site.login}
    return {name: value for name, value in values.items() if value is not None} | dict(resources.get(site.name, {}))


def parse(chunk: ChunkTemplate, site: Site | None, source: str = "submit_template") -> htcondor2.Submit:
    """The chunk's submit description: placeholders filled for `site` (left as they are for None),
    VARS defined first (with ResourceName), parsed by htcondor2.Submit."""
    text = chunk.text
    if site is not None:
        values = resource_values(site, chunk.resources)

        def fill(match):
            if match[1] not in values:
                raise TemplateError(f"{source}: {match[0]} is not known for site {site.name}; it has "
                                    f"{', '.join('{resource.' + n + '}' for n in values)} (catalogue entry "
                                    "sites." + site.name + ", or give it in --resources resources.yaml)")
            return str(values[match[1]])

        text = PLACEHOLDER.sub(fill, text)
    macros = dict(chunk.vars) | ({"ResourceName": site.name} if site is not None else {})
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


def requested(submit: htcondor2.Submit, request: ResourceRequest, site: Site | None, rule: str) -> ResourceRequest:
    """`request` with the template's request_* commands laid over it, each admitted at `site`: a
    command the site cannot honour is refused, naming the command and the site."""
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
        request = replace(request, **{field: value})
        if site is not None:
            try:
                site.admit(request, rule=rule).or_raise()
            except SiteRefusal as refusal:
                raise TemplateError(f"submit_template command {key} = {text} contradicts site {site.name}: "
                                    f"{refusal}") from None
    return request


def admission(chunk: ChunkTemplate, request: ResourceRequest, rule: str) -> Callable[[Site], Admission]:
    """Each site's verdict on the chunk, whose request depends on the site (placement.place judges
    it so): the template filled for that site, its request_* over `request`. A site the template
    contradicts, or that has no value for one of its {resource.*}, refuses it with that reason."""

    def at(site: Site) -> Admission:
        try:
            return site.admit(requested(parse(chunk, site), request, site, rule), rule=rule)
        except TemplateError as error:
            return Admission(None, str(error))

    return at


def environment(submit: htcondor2.Submit) -> tuple[dict, list[str]]:
    """The template's environment (HTCondor's new syntax) without secret-named variables, and
    the names withheld (secrets.withheld_warning says how to pass a token file instead)."""
    if "environment" not in submit:
        return {}, []
    text = submit["environment"].strip()
    if text.startswith('"') and text.endswith('"'):
        text = text[1:-1].replace('""', '"')
    return secrets.withhold(dict(item.split("=", 1) for item in shlex.split(text) if "=" in item))


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
    """The chunk's template, if the rule gave one (resource htcannex_template)."""
    text = resources.get(RESOURCE)
    return ChunkTemplate.decode(text) if text else None
