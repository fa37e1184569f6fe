"""The workflow's .test config, as CI runs it: from the repository root, local executor."""
from .conftest import BIN, REPO, WORKFLOW, run


def test_dot_test_config_runs_with_the_local_executor(tmp_path):
    # --directory: results go to tmp_path while paths in the config stay relative to the repository.
    result = run([str(BIN / "snakemake"), "-s", str(WORKFLOW / "Snakefile"), "--cores", "2",
                  "--configfile", str(WORKFLOW / ".test" / "config" / "config.yaml"), "--directory", str(tmp_path),
                  "--config", "checkpoint_store=local"], REPO, None)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    summary = (tmp_path / "results" / "toy_ci" / "compare" / "summary.tsv").read_text().splitlines()
    assert summary[0].split("\t")[:3] == ["run", "run_number", "twins"]
    assert sorted(line.split("\t")[1] for line in summary[1:]) == ["0", "1"]
    assert {line.split("\t")[2] for line in summary[1:]} == {"identical (bitwise)"}
