# The checkpoint store: with `checkpoint_store: osdf`, objects of Snakemake's osdf storage under
# osdf_prefix. Checkpoints live there (rules/common.smk), and so may what an including workflow
# keeps next to them (protein_lm's data), which is why this comes before the workflow's config.
# The config holds plain URLs (script jobs get the config pickled; storage files do not pickle):
# store_file turns one into the storage file where a rule lists it.
import hashlib
import json

from snakemake.exceptions import WorkflowError

STORE = "osdf"  # the storage provider's name, and the scheme of its URLs


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
