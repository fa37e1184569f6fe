"""The site catalogue (a profile's htcannex.yaml) and what each site can take.

`load_catalogue(path)` reads the file, checks its structure with a JSON schema
and its meaning in code, and returns a `Catalogue`: the sites, the rotation per
rule, the annex guards and the pool to submit to. Any mistake raises one
`HtcannexConfigError` naming the file, the key path and the fix.

Queue facts (whole-node or shared, cores/memory/GPUs per node, longest
lifetime, nodes per job) come from HTCondor's own table of annex sites,
`htcondor_cli.annex_validate.SYSTEM_TABLE`: the catalogue may leave them out
(they are filled in) or restate them (they are checked against it), and the
annex request each site implies is run through `validate_constraints`, the
check `htcondor annex create` itself makes. A site the table does not know
(Jetstream2, or a site the embedded pool plays) says `facts: catalogue` and
gives its facts itself.

The schema is catalogue_schema.py; a site and its verdict on a job, site.py.
"""
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import classad2
import yaml
from htcondor_cli import annex_validate

from snakemake_executor_plugin_htcannex.sites.catalogue_schema import (ANNEX_ONLY_KEYS, CATALOGUE_SCHEMA, POOL_ONLY_KEYS, HtcannexConfigError,
                               HtcannexConfigWarning)
from snakemake_executor_plugin_htcannex.sites.rotation import Rotation, RulePolicy
from snakemake_executor_plugin_htcannex.sites.site import MemoryRequest, Site, SiteKind
from snakemake_executor_plugin_htcannex.submit_language import SubmitValueError, check_extra_command
from snakemake_executor_plugin_htcannex.units import UnitError, format_duration_s, format_size_mib, parse_duration_s, parse_size_mib


@dataclass(frozen=True)
class AnnexGuards:
    mode: str = "ask"  # off | ask | auto
    max_annexes: int = 4
    core_hour_budget: float = 0.0  # 0: no annex may be requested
    idle_timeout_s: int = 1800


@dataclass(frozen=True)
class Catalogue:
    path: Path
    pool: str
    sites: Mapping[str, Site]
    rotation: Rotation
    annex: AnnexGuards
    submit_commands: Mapping[str, object]  # escape hatch for every job: SubmitOptions.extra_commands


def load_catalogue(path: Path | str) -> Catalogue:
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise HtcannexConfigError(path, "(file)", "does not exist",
                                  "point --htcannex-config at a profile's htcannex.yaml") from None
    except yaml.YAMLError as error:
        raise HtcannexConfigError(path, "(file)", f"is not valid YAML ({error})",
                                  "correct the syntax at the line shown") from None
    return _Loader(path).catalogue(document)


# The warnings already shown in this process, per htcannex.yaml (warnings.warn_explicit's registry):
# a file loaded twice (a CLI command, then the executor) says its warning once.
_WARNED: dict[str, dict] = {}


def _key(parts) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


class _Loader:
    def __init__(self, path: Path):
        self.path = path

    def error(self, key: str, problem: str, fix: str) -> HtcannexConfigError:
        return HtcannexConfigError(self.path, key, problem, fix)

    def catalogue(self, document) -> Catalogue:
        if not isinstance(document, dict):
            raise self.error("(top level)", "is not a mapping of keys (pool, rotation, annex, sites)",
                             "start from profiles/local/htcannex.yaml")
        annex = document.get("annex")
        if isinstance(annex, dict) and annex.get("mode") is False:
            annex["mode"] = "off"  # YAML 1.1 (PyYAML) reads a bare `off` as false
        if isinstance(annex, dict) and "max_per_site" in annex:
            self.retired_max_per_site(annex)
        self.check_schema(document)
        sites = {name: self.site(name, entry) for name, entry in document["sites"].items()}
        return Catalogue(
            path=self.path,
            pool=document.get("pool", "default"),
            sites=sites,
            rotation=self.rotation(document, sites),
            annex=self.annex(document.get("annex", {})),
            submit_commands=self.submit_commands("submit", document.get("submit", {})),
        )

    def retired_max_per_site(self, annex: dict) -> None:
        """`annex.max_per_site` is gone: an annex is named after its site, so a site never has more than
        one live annex. Profiles written before still say `max_per_site: 1` (the shared real-pool profile
        does), which asks for exactly that: it is dropped with a warning, shown once per file and process.
        Any other value asks for what htcannex cannot do, and is refused."""
        value = annex.pop("max_per_site")
        if type(value) is not int or value != 1:  # not `true`, which Python counts as 1
            raise self.error("annex.max_per_site", "is not a setting any more: an annex is named after its site, "
                             "so a site never has more than one live annex",
                             "remove it (max_annexes limits the annexes live at once)")
        warnings.warn_explicit(
            "annex.max_per_site: 1 has no effect: there is at most one annex per site; remove the line",
            HtcannexConfigWarning, filename=str(self.path), lineno=self.line_of("annex", "max_per_site"),
            registry=_WARNED.setdefault(str(self.path), {}))

    def line_of(self, *keys: str) -> int:
        """The line (from 1) of the value at `keys` in this file, for a message that points at it."""
        node = yaml.compose(self.path.read_text())
        for key in keys:
            node = next(value for name, value in node.value if name.value == key)
        return node.start_mark.line + 1

    def check_schema(self, document: dict) -> None:
        # Imported here: every Snakemake process imports this plugin (also each job's own
        # Snakemake, which never loads a catalogue); jsonschema costs ~0.1 s (docs/benchmarks.md).
        import jsonschema

        validator = jsonschema.Draft202012Validator(CATALOGUE_SCHEMA)
        error = jsonschema.exceptions.best_match(validator.iter_errors(document))
        if error is None:
            return
        path, kind, schema = list(error.absolute_path), error.validator, error.schema
        if kind == "additionalProperties":
            known = sorted(schema.get("properties", {}))
            unknown = sorted(set(error.instance) - set(known))[0]
            raise self.error(_key(path + [unknown]), "unknown key",
                             f"remove it or correct its spelling; the keys here are {', '.join(known)}")
        if kind == "required":
            missing = next(name for name in error.validator_value if name not in error.instance)
            raise self.error(_key(path + [missing]), "is missing", f"add {missing}: (see docs/sites.md)")
        if "propertyNames" in error.schema_path:
            # a bad key name: jsonschema reports the name as the instance, at the mapping's path
            raise self.error(_key(path + [error.instance]), "is not a valid name",
                             "use lower-case letters, digits and '-' (sites) or an identifier (rules and "
                             "wildcards)")
        if kind == "enum":
            raise self.error(_key(path), f"is {error.instance!r}",
                             f"use one of {', '.join(map(str, error.validator_value))}")
        if kind == "minProperties":
            raise self.error(_key(path), "is empty", "describe at least one site")
        raise self.error(_key(path), f"{error.instance!r} is invalid ({error.message})",
                         "see docs/sites.md for what this key takes")

    def submit_commands(self, key: str, commands: dict) -> dict:
        for name, value in commands.items():
            try:
                check_extra_command(name, value)
            except SubmitValueError as error:
                raise self.error(f"{key}.{name}", error.why, "see docs/sites.md, 'Escape hatch'") from None
        return commands

    def size(self, key: str, value) -> int:
        try:
            return parse_size_mib(value, field=key)
        except UnitError as error:
            raise self.error(key, str(error).removeprefix(f"{key}: "), "write e.g. 92GB or 512MB") from None

    def duration(self, key: str, value) -> int:
        try:
            return parse_duration_s(value, field=key)
        except UnitError as error:
            raise self.error(key, str(error).removeprefix(f"{key}: "), "write e.g. 4h, 30m or 2d") from None

    def site(self, name: str, entry: dict) -> Site:
        key = f"sites.{name}"
        stray = ANNEX_ONLY_KEYS if entry["kind"] == "pool" else POOL_ONLY_KEYS
        for wrong in stray:
            if wrong in entry:
                raise self.error(f"{key}.{wrong}", f"does not apply to a site of kind {entry['kind']}",
                                 "remove it (see docs/sites.md, 'kind')")
        if "requirements" in entry:
            try:
                classad2.ExprTree(entry["requirements"])
            except Exception:  # classad2 raises its own ClassAdException, not exported as a type
                raise self.error(f"{key}.requirements", f"{entry['requirements']!r} is not a ClassAd expression",
                                 'write e.g. (TARGET.OpSysMajorVer == 9)') from None
        common = dict(
            name=name, kind=SiteKind(entry["kind"]), source=str(self.path),
            cpus=entry.get("cpus"),
            memory_mb=self.size(f"{key}.memory", entry["memory"]) if "memory" in entry else None,
            gpus=entry.get("gpus", 0),
            gpu_type=entry.get("gpu_type"),
            gpu_memory_mb=self.size(f"{key}.gpu_memory", entry["gpu_memory"]) if "gpu_memory" in entry else None,
            gpu_capability=entry.get("gpu_capability"),
            disk_mb=self.size(f"{key}.disk", entry["disk"]) if "disk" in entry else None,
            requirements=entry.get("requirements"),
            submit_commands=self.submit_commands(f"{key}.submit", entry.get("submit", {})),
        )
        if entry["kind"] == "pool":
            return Site(
                **common,
                memory_request=MemoryRequest(entry.get("memory_request", "pass")),
                max_runtime_s=self.duration(f"{key}.max_runtime", entry["max_runtime"])
                if "max_runtime" in entry else None,
            )
        return self.annex_site(key, entry, common)

    def annex_site(self, key: str, entry: dict, common: dict) -> Site:
        facts = entry.get("facts", "system-table")
        if facts == "system-table":
            table = self.table_facts(key, entry)
        else:
            table = self.catalogue_facts(entry)
        cpus = common["cpus"] if common["cpus"] is not None else table["cpus"]
        memory_mb = common["memory_mb"] if common["memory_mb"] is not None else table["memory_mb"]
        gpus = entry.get("gpus", table["gpus"])
        max_lifetime_s = (self.duration(f"{key}.max_lifetime", entry["max_lifetime"])
                          if "max_lifetime" in entry else table["max_lifetime_s"])
        source = "HTCondor's SYSTEM_TABLE does not give it" if facts == "system-table" else \
            "a site with facts: catalogue gives all its facts"
        for name, value in (("cpus", cpus), ("memory", memory_mb), ("max_lifetime", max_lifetime_s)):
            if value is None:
                raise self.error(f"{key}.{name}", f"is missing and {source}",
                                 f"add {name}: for this queue (or instance type)")
        if "lifetime" not in entry:
            raise self.error(f"{key}.lifetime", "is missing",
                             f"add lifetime: (how long each annex lives, at most {format_duration_s(max_lifetime_s)})")
        lifetime_s = self.duration(f"{key}.lifetime", entry["lifetime"])
        if lifetime_s > max_lifetime_s:
            raise self.error(f"{key}.lifetime", f"{entry['lifetime']} is longer than the queue's maximum "
                             f"{format_duration_s(max_lifetime_s)}",
                             f"set it to {format_duration_s(max_lifetime_s)} or less")
        allocation = table["allocation"]
        if allocation == "gpu-shared":
            for name in ("cpus", "memory"):
                if name not in entry:
                    raise self.error(f"{key}.{name}", f"is missing, and the '{entry['queue']}' queue gives each "
                                     "job a share of a node in proportion to its GPUs",
                                     f"add {name}: the share that {gpus} GPU(s) bring")
        site = Site(
            **{**common, "cpus": cpus, "memory_mb": memory_mb, "gpus": gpus},
            memory_request=MemoryRequest(entry.get("memory_request", "drop" if allocation == "node" else "pass")),
            create=entry.get("create", "htcannex"),
            facts=facts,
            system=entry.get("system"),
            queue=entry.get("queue"),
            allocation=allocation,
            nodes=entry.get("nodes", 1),
            max_lifetime_s=max_lifetime_s,
            lifetime_s=lifetime_s,
            project=entry.get("project"),
            login=entry.get("login"),
            gpu_type_flag=entry.get("gpu_type") if table.get("gpu_types") else None,
        )
        if facts == "system-table":
            self.check_against_table(key, entry, site, table)
        return site

    def catalogue_facts(self, entry: dict) -> dict:
        """Facts of a site HTCondor's table does not know: all from the catalogue."""
        whole_node = entry.get("whole_node", False)
        return {"allocation": "node" if whole_node else "cores_or_ram", "cpus": None, "memory_mb": None,
                "gpus": 0, "max_lifetime_s": None}

    def table_facts(self, key: str, entry: dict) -> dict:
        """Facts of `system`/`queue` from htcondor_cli's SYSTEM_TABLE (None where it has none)."""
        systems = annex_validate.SYSTEM_TABLE
        for required in ("system", "queue"):
            if required not in entry:
                raise self.error(f"{key}.{required}", "is missing",
                                 f"add {required}: (the {required} `htcondor annex create` is given), or set "
                                 "facts: catalogue for a site HTCondor's table does not know")
        system_name = entry["system"]
        if system_name not in systems:
            raise self.error(f"{key}.system", f"{system_name!r} is not in HTCondor's annex SYSTEM_TABLE "
                             f"(known: {', '.join(sorted(systems))})",
                             "correct the name, or set facts: catalogue and give cpus, memory, gpus, whole_node "
                             "and max_lifetime yourself (as for Jetstream2)")
        system = systems[system_name]
        try:
            queue = system.get_constraints(entry["queue"], entry.get("gpus"), entry.get("gpu_type"))
        except ValueError as error:
            raise self.error(f"{key}.gpu_type", str(error), "set gpu_type to one the message lists") from None
        if queue is None:
            raise self.error(f"{key}.queue", f"{entry['queue']!r} is not a queue of {system.pretty_name} in "
                             f"HTCondor's SYSTEM_TABLE (queues: {', '.join(system.queues)})",
                             "use one of those queues")
        if "whole_node" in entry and entry["whole_node"] != (queue["allocation_type"] == "node"):
            raise self.error(f"{key}.whole_node", f"says {entry['whole_node']} but SYSTEM_TABLE gives the "
                             f"'{entry['queue']}' queue allocation type '{queue['allocation_type']}'",
                             "remove whole_node (it is taken from the table)")
        return {
            "allocation": queue["allocation_type"],
            "cpus": queue.get("cores_per_node"),
            "memory_mb": queue.get("ram_per_node"),
            "gpus": queue.get("gpus_per_node") or 0,
            "gpus_per_node": queue.get("gpus_per_node"),
            "gpu_types": queue.get("gpu_types"),
            "max_lifetime_s": queue.get("max_duration"),
            "max_nodes": queue.get("max_nodes_per_job"),
            "knows_shape": "cores_per_node" in queue,
        }

    def check_against_table(self, key: str, entry: dict, site: Site, table: dict) -> None:
        if table["knows_shape"]:
            for name, ours, theirs, show in (
                ("cpus", site.cpus, table["cpus"], str),
                ("memory", site.memory_mb, table["memory_mb"], format_size_mib),
            ):
                if ours > theirs:
                    raise self.error(f"{key}.{name}", f"{show(ours)} is more than a '{site.queue}' node has "
                                     f"({show(theirs)}, per SYSTEM_TABLE)", f"set it to {show(theirs)} or less")
            if site.gpus > (table["gpus_per_node"] or 0):
                problem = (f"{site.gpus} is more than a '{site.queue}' node has ({table['gpus_per_node']})"
                           if table["gpus_per_node"] else f"'{site.queue}' is a CPU-only queue")
                raise self.error(f"{key}.gpus", problem, "lower gpus, or pick a GPU queue")
        table_max = table["max_lifetime_s"]
        if table_max is not None and site.max_lifetime_s > table_max:
            raise self.error(f"{key}.max_lifetime", f"{entry['max_lifetime']} is longer than the "
                             f"'{site.queue}' queue allows ({format_duration_s(table_max)}, per SYSTEM_TABLE)",
                             f"set it to {format_duration_s(table_max)} or less")
        if table["max_nodes"] is not None and site.nodes > table["max_nodes"]:
            raise self.error(f"{key}.nodes", f"{site.nodes} is more than the '{site.queue}' queue allows per job "
                             f"({table['max_nodes']})", f"set it to {table['max_nodes']} or less")
        annex = site.annex_arguments()
        try:
            annex_validate.validate_constraints(
                system=annex.system, queue_name=annex.queue, nodes=annex.nodes,
                lifetime_in_seconds=annex.lifetime_s, allocation=annex.project, cpus=annex.cpus,
                mem_mb=annex.mem_mb, idletime_in_seconds=0, gpus=annex.gpus, gpu_type=annex.gpu_type,
            )
        except ValueError as error:
            raise self.error(key, f"`htcondor annex create` would refuse this site: {error}",
                             "change the site's queue, nodes, gpus, gpu_type, project or lifetime as it says") from None

    def rotation(self, document: dict, sites: Mapping[str, Site]) -> Rotation:
        rules = {}
        for rule, entry in document.get("rotation", {}).items():
            key = f"rotation.{rule}"
            listed = entry.get("sites", [])
            for index, site in enumerate(listed):
                if site not in sites:
                    raise self.error(f"{key}.sites[{index}]", f"names the unknown site {site!r}",
                                     f"name one of the sites under sites: ({', '.join(sites)})")
                if listed.index(site) != index:
                    raise self.error(f"{key}.sites[{index}]", f"repeats {site!r}", "list each site once")
            if entry["policy"] != "any" and not listed:
                raise self.error(f"{key}.sites", f"is missing or empty for policy {entry['policy']}",
                                 "list the sites this rule rotates over")
            rules[rule] = RulePolicy(entry["policy"], tuple(listed))
        return Rotation(
            rules=rules,
            run_wildcard=document.get("run_wildcard", "run"),
            chunk_wildcard=document.get("chunk_wildcard", "chunk"),
        )

    def annex(self, entry: dict) -> AnnexGuards:
        return AnnexGuards(
            mode=entry.get("mode", AnnexGuards.mode),
            max_annexes=entry.get("max_annexes", AnnexGuards.max_annexes),
            core_hour_budget=float(entry.get("core_hour_budget", AnnexGuards.core_hour_budget)),
            idle_timeout_s=self.duration("annex.idle_timeout", entry["idle_timeout"])
            if "idle_timeout" in entry else AnnexGuards.idle_timeout_s,
        )
