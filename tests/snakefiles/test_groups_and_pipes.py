"""Groups, pipes and unnamed rules run on htcannex as with the local executor.

Each case is a Snakefile run through the snakemake CLI twice, with `--executor local` and with
htcannex on the embedded pool; both must leave the same files, contents and modes."""
import pytest

from same_as_local import assert_same_as_local, copy_workflow, run_htcannex, run_local


@pytest.mark.slow
def test_unnamed_rule_pipe_and_groups_named_by_any_text(tmp_path, embedded_pool):
    # `group: "my-group"`, `group: 0`, a pipe (always a group) and an unnamed rule (Snakemake names it "2", its place in the file).
    _, by_htcannex = assert_same_as_local("groups", tmp_path, embedded_pool)
    assert "identifier" not in by_htcannex.stderr
    # The queue names the user's rules, never Snakemake's generated group job names.
    rules = {ad["HtcannexRule"] for ad in embedded_pool.schedd().history("true", ["HtcannexRule"])}
    assert rules == {"2", "dash_a, dash_b (group my-group)", "number_a, number_b (group 0)",
                     "consume, produce (grouped by a pipe)"}


@pytest.mark.slow
def test_snakemakes_own_pipes_workflow(tmp_path, embedded_pool):
    assert_same_as_local("pipes", tmp_path, embedded_pool)


@pytest.mark.slow
def test_snakemakes_own_group_temp_workflow(tmp_path, embedded_pool):
    # The group's temp() intermediate is deleted by the job's Snakemake, as locally; it must not be
    # asked back from the job (HTCondor would hold it, 12/2).
    assert_same_as_local("group_temp", tmp_path, embedded_pool)


@pytest.mark.slow
def test_a_failed_group_job_says_why_once_and_never_message_none(tmp_path, embedded_pool):
    by_local = run_local(copy_workflow("groups", tmp_path / "local"), "fails/b.txt")
    result = run_htcannex(copy_workflow("groups", tmp_path / "htcannex"), embedded_pool, "fails/b.txt")
    assert by_local.returncode != 0 and result.returncode != 0
    # The job's stderr tail, under the group's rules (not Snakemake's generated group job name).
    assert "Error in group job" in result.stderr and "(rules fail_a, fail_b (group fails))" in result.stderr
    assert "the second job fails" in result.stderr
    # Snakemake 9.27's own log handler prints "message: None" for a failed rule without a message,
    # locally too (the job's Snakemake does, in the stderr tail quoted): htcannex adds none of its own.
    assert result.stderr.count("message: None") <= by_local.stderr.count("message: None")
    assert result.stderr.count("message: failed with its group job") == 2
