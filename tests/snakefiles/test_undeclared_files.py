"""Files a job needs that Snakemake does not list travel with it."""
import pytest

from same_as_local import assert_same_as_local, copy_workflow, run_htcannex


@pytest.mark.slow
def test_modules_next_to_the_snakefile_and_files_a_run_block_opens(tmp_path, embedded_pool):
    _, by_htcannex = assert_same_as_local("undeclared", tmp_path, embedded_pool)
    assert "ModuleNotFoundError" not in by_htcannex.stderr
    # The user is told which files htcannex added to Snakemake's list of workflow sources.
    told = next(line for line in by_htcannex.stderr.splitlines() if "does not list as workflow sources" in line)
    assert told.endswith(": greeting.py, lib/__init__.py, lib/numbers.py, lookup.tsv")


@pytest.mark.slow
def test_a_file_a_run_block_computes_the_name_of_is_named_with_the_fix(tmp_path, embedded_pool):
    by_htcannex = run_htcannex(copy_workflow("undeclared", tmp_path / "htcannex"), embedded_pool, "computed.txt")
    assert by_htcannex.returncode != 0
    assert "could not open computed.tsv, which is in the working directory here" in by_htcannex.stderr
    assert "declare it as an input of the rule" in by_htcannex.stderr
