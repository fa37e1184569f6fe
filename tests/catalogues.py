"""Catalogue documents for the tests of catalogue.py and site.py: the repo's profiles, and a
small catalogue (BASE) that a test edits and loads."""
import copy
from pathlib import Path

import yaml

from snakemake_executor_plugin_htcannex.sites.catalogue import load_catalogue

REPO = Path(__file__).resolve().parents[1]
NAIRR = REPO / "profiles" / "nairr" / "htcannex.yaml"
LOCAL = REPO / "profiles" / "local" / "htcannex.yaml"

BASE = {
    "pool": "local",
    "rotation": {"train_chunk": {"policy": "round-robin", "sites": ["expanse", "laptop"]}},
    "annex": {"mode": "auto", "max_annexes": 2, "core_hour_budget": 100, "idle_timeout": "10m"},
    "sites": {
        "expanse": {
            "kind": "annex", "system": "expanse", "queue": "gpu-shared", "cpus": 10, "memory": "92GB",
            "gpus": 1, "gpu_type": "V100", "gpu_memory": "32GB", "gpu_capability": 7.0,
            "lifetime": "4h", "project": "CHANGE_ME", "login": "CHANGE_ME",
        },
        "laptop": {"kind": "annex", "facts": "catalogue", "cpus": 1, "memory": "2GB",
                   "max_lifetime": "1h", "lifetime": "30m"},
        "ospool": {"kind": "pool", "max_runtime": "40h"},
    },
}


def write(tmp_path, document) -> Path:
    path = tmp_path / "htcannex.yaml"
    path.write_text(yaml.safe_dump(document) if not isinstance(document, str) else document)
    return path


def load_with(tmp_path, edit):
    document = copy.deepcopy(BASE)
    edit(document)
    return load_catalogue(write(tmp_path, document))
