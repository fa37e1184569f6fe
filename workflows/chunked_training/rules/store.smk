# The checkpoint store: with `checkpoint_store: osdf`, objects of Snakemake's osdf storage under
# osdf_prefix. Checkpoints live there (rules/common.smk), and so may what an including workflow
# keeps next to them (protein_lm's data), which is why this comes before the workflow's config.
# The config holds plain URLs (script jobs get the config pickled; storage files do not pickle):
# store_file turns one into the storage file where a rule lists it.
import hashlib
import json
import os

from snakemake.exceptions import WorkflowError

STORE = "osdf"  # the storage provider's name, and the scheme of its URLs


def configfiles_over_profile_config():
    """Snakemake lets --config override configfiles, and a profile's `config:` is --config: the
    local profile's `checkpoint_store: osdf` replaced a module user's own `checkpoint_store: local`.
    Here a top-level key that a configfile of the user's sets (`configfile:` in their Snakefile,
    --configfile; not this workflow's own config/config.yaml, its defaults) keeps the user's value:
    a profile's config only overrides the workflow's defaults (docs/bring_your_own_training.md,
    "Which config wins"). Jobs decide the same from the same files."""
    from snakemake.common.configfile import load_configfile

    defaults = os.path.abspath(os.path.join(HERE, "config", "config.yaml"))
    explicit = {}
    for path in workflow.configfiles:
        if os.path.abspath(path) != defaults:
            explicit.update(load_configfile(path) or {})
    for key in workflow.config_settings.config:
        if key in explicit:
            config[key] = explicit[key]


configfiles_over_profile_config()


def content_hash(value):
    """A short name for what an object's bytes depend on: OSDF objects are immutable and caches
    serve the first bytes, so changed inputs must write new names, not meet the old objects."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]


def store_url(relative):
    """The URL of the store's object `relative`."""
    return f"{config['osdf_prefix'].rstrip('/')}/{relative}"


def is_store_url(path):
    return path.startswith(f"{STORE}://")


def store_file(path):
    """`path` as a rule lists it: a store URL becomes its storage file (whose string is the
    local path in a job), anything else stays a path."""
    if not is_store_url(path):
        return path
    if config["checkpoint_store"] != STORE:
        raise WorkflowError(f"{path} is an OSDF object, but checkpoint_store is {config['checkpoint_store']!r}: "
                            f"set checkpoint_store: {STORE} (and the osdf storage settings) or use a local path")
    return storage.osdf(path)


if config["checkpoint_store"] == STORE:

    storage osdf:
        provider=STORE,
