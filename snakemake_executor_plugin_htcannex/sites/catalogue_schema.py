"""What a profile's htcannex.yaml may contain (a JSON schema) and the error that names a mistake in it.

catalogue.py checks a document against CATALOGUE_SCHEMA, then its meaning in code; every mistake
is one HtcannexConfigError with the file, the key path and the fix. docs/sites.md describes the keys.
"""
from pathlib import Path

from snakemake_executor_plugin_htcannex.sites.rotation import POLICIES

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
SITE_NAME = r"^[a-z][a-z0-9-]*$"
QUANTITY = {"type": ["string", "number"]}
# Keys that only make sense for a site whose slots come from an annex (requested, or started by hand).
ANNEX_ONLY_KEYS = ("create", "facts", "system", "queue", "whole_node", "nodes", "max_lifetime", "lifetime",
                   "project", "login")
POOL_ONLY_KEYS = ("max_runtime",)

SITE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["kind"],
    "properties": {
        "kind": {"enum": ["annex", "pool"]},
        "create": {"enum": ["htcannex", "manual"]},
        "facts": {"enum": ["system-table", "catalogue"]},
        "system": {"type": "string"},
        "queue": {"type": "string"},
        "whole_node": {"type": "boolean"},
        "memory_request": {"enum": ["pass", "drop", "refuse"]},
        "nodes": {"type": "integer", "minimum": 1},
        "cpus": {"type": "integer", "minimum": 1},
        "memory": QUANTITY,
        "gpus": {"type": "integer", "minimum": 0},
        "gpu_type": {"type": "string", "minLength": 1},
        "gpu_memory": QUANTITY,
        "gpu_capability": {"type": "number", "minimum": 0},
        "disk": QUANTITY,
        "max_lifetime": QUANTITY,
        "lifetime": QUANTITY,
        "max_runtime": QUANTITY,
        "project": {"type": "string", "minLength": 1},
        "login": {"type": "string", "minLength": 1},
        "requirements": {"type": "string", "minLength": 1},
        "submit": {"$ref": "#/$defs/submit"},
    },
}
SUBMIT_SCHEMA = {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}

CATALOGUE_SCHEMA = {
    "$defs": {"submit": SUBMIT_SCHEMA},
    "type": "object",
    "additionalProperties": False,
    "required": ["sites"],
    "properties": {
        "pool": {"type": "string", "minLength": 1},
        "submit": {"$ref": "#/$defs/submit"},
        "run_wildcard": {"type": "string", "pattern": IDENTIFIER},
        "chunk_wildcard": {"type": "string", "pattern": IDENTIFIER},
        "rotation": {
            "type": "object",
            "propertyNames": {"pattern": IDENTIFIER},
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "required": ["policy"],
                "properties": {
                    "policy": {"enum": list(POLICIES)},
                    "sites": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "annex": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "mode": {"enum": ["off", "ask", "auto"]},
                "max_annexes": {"type": "integer", "minimum": 1},
                "core_hour_budget": {"type": "number", "minimum": 0},
                "idle_timeout": QUANTITY,
            },
        },
        "sites": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": SITE_NAME},
            "additionalProperties": SITE_SCHEMA,
        },
    },
}


class HtcannexConfigWarning(UserWarning):
    """A setting in htcannex.yaml that is accepted but does nothing: shown with the file and its line."""


class HtcannexConfigError(ValueError):
    """A mistake in htcannex.yaml: which file, which key, what is wrong, how to fix it."""

    def __init__(self, file: Path | str, key: str, problem: str, fix: str):
        self.file, self.key, self.problem, self.fix = str(file), key, problem.strip().rstrip("."), fix
        super().__init__(f"{file}: {key}: {self.problem}. Fix: {fix}")
