"""Fixtures for the protein_lm workflow: its package on sys.path, a tiny data set, tiny runs."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "workflows" / "protein_lm"
sys.path.insert(0, str(WORKFLOW / "scripts"))

from protein_lm.config import TrainParams  # noqa: E402
from protein_lm.data import DataConfig, generate  # noqa: E402

TINY_DATA = {
    "seed": 7, "n_variants": 120, "n_experimental": 40, "max_mutations": 3, "library_sites": 10,
    "epistatic_pairs": 5, "noise": 0.1, "experimental_noise": 0.3, "epistasis_scale": 0.3, "hidden_fraction": 0.0,
    "val_fraction": 0.2,
    "experimental_test_fraction": 0.5, "synthetic_protein_lengths": [],
}
TINY_TRAIN = {
    "d_model": 16, "n_layers": 1, "n_heads": 2, "max_relative_distance": 8, "dropout": 0.1, "lr": 0.003,
    "weight_decay": 0.01, "batch_size": 16, "warmup_fraction": 0.1, "grad_clip": 1.0,
}


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("data")
    paths = {"simulated": root / "sim.npz", "experimental": root / "exp.npz", "metadata": root / "meta.json"}
    generate(DataConfig(**TINY_DATA), paths["simulated"], paths["experimental"], paths["metadata"])
    return paths


@pytest.fixture
def tiny_params() -> TrainParams:
    return TrainParams.from_dict(TINY_TRAIN | {"seed": 11})


def tiny_config(tmp_path: Path, **overrides) -> Path:
    """A --configfile that shrinks the workflow to seconds of training (merged over the default)."""
    config = {
        "data": TINY_DATA,
        "train": TINY_TRAIN,
        "sweep": {"seed": {"list": [1, 2]}},
        "pretrain": {"chunks": 2, "epochs_per_job": 1, "checkpoint_every_steps": 3, "threads": 1},
        "finetune": {"epochs": 1, "lr": 0.001, "batch_size": 16, "threads": 1},
    } | overrides
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def snakemake(workdir: Path, *args: str, env: dict | None = None, timeout: int = 300,
              snakefile: Path = WORKFLOW / "Snakefile") -> subprocess.CompletedProcess:
    """The snakemake CLI of this environment on the protein_lm Snakefile, run in `workdir`
    (Snakemake prints errors on stdout or stderr: both end up in `.stdout`)."""
    argv = [str(Path(sys.executable).parent / "snakemake"), "-s", str(snakefile), *args]
    return subprocess.run(argv, cwd=workdir, env=env or dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def planned_run(workdir: Path, *args: str, snakefile: Path = WORKFLOW / "Snakefile") -> str:
    """The one distributed run a dry run of `workdir`'s config plans (its id hashes the run's
    settings, so a test asks the workflow rather than writing it down)."""
    dry = snakemake(workdir, "-n", *args, snakefile=snakefile)
    assert dry.returncode == 0, dry.stdout[-3000:]
    runs = set(re.findall(r"distributed/([0-9a-f]{8})/", dry.stdout))
    assert len(runs) == 1, f"expected one planned run, found {sorted(runs)}"
    return runs.pop()
