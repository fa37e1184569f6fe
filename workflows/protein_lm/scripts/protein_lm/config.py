"""The workflow's config: schema validation with messages that name the key, and typed views."""

from dataclasses import dataclass, fields
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate


class ConfigError(ValueError):
    """A config value the workflow cannot run with; the message names the file and the key."""


def validate_config(config: dict, schema: Path, source: str) -> None:
    """Validate (and fill defaults) with snakemake.utils.validate, re-raising its error as one line
    that names the offending key, since its own message is a schema dump."""
    # Imported here, not at the top: every job's script imports TrainParams from this module,
    # and jsonschema would cost it 0.1-0.3 s of start-up for a check only the Snakefile makes.
    import jsonschema

    try:
        validate(config, str(schema))
    except WorkflowError as error:
        # WorkflowError flattens its arguments into one string; the ValidationError is the context.
        cause = error.__context__ if isinstance(error.__context__, jsonschema.ValidationError) else None
        if cause is None:
            raise
        key = ".".join(str(p) for p in cause.absolute_path) or "(top level)"
        raise ConfigError(
            f"{source}: config key '{key}': {cause.message}. Fix it to match {schema.parent.name}/{schema.name} (see docs/protein_lm.md)."
        ) from None


@dataclass(frozen=True)
class TrainParams:
    """Hyperparameters of one run; every field can be swept (the schema lists the same names)."""

    seed: int
    d_model: int
    n_layers: int
    n_heads: int
    max_relative_distance: int
    dropout: float
    lr: float
    weight_decay: float
    batch_size: int
    warmup_fraction: float
    grad_clip: float

    @classmethod
    def from_dict(cls, values: dict) -> "TrainParams":
        return cls(**{f.name: f.type(values[f.name]) for f in fields(cls)})

    def check(self, source: str) -> None:
        if self.d_model % self.n_heads:
            raise ConfigError(f"{source}: d_model {self.d_model} must be divisible by n_heads {self.n_heads} (keys train.d_model / train.n_heads or their sweep vars)")
