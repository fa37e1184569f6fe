"""Files and directories whose names HTCondor's comma-separated transfer lists cannot hold (a comma, spaces at
the ends) travel under stand-in names and come back under their own (submit/transfer_names.py): a Hydra-style
sweep through the snakemake CLI leaves what the local executor leaves, from a working directory whose own path
has a comma, a space, `$(...)` and a non-ASCII letter."""
import pytest

from same_as_local import copy_workflow, run_htcannex, run_local, tree


@pytest.mark.slow
def test_a_hydra_sweep_with_commas_in_its_names_comes_back_as_locally(tmp_path, embedded_pool):
    local = copy_workflow("awkward_names", tmp_path / "local")
    remote = copy_workflow("awkward_names", tmp_path / "my work, $(Cluster) é")
    by_local = run_local(local)
    assert by_local.returncode == 0, by_local.stderr[-3000:]
    by_htcannex = run_htcannex(remote, embedded_pool)
    assert by_htcannex.returncode == 0, by_htcannex.stderr[-5000:]
    assert tree(remote) == tree(local)
    assert (remote / "lr=0.1,wd=0.01" / "eval.txt").read_text() == "trained lr=0.1,wd=0.01\nevaluated\n"
