"""Every `htcannex` command, given bad arguments or run where what it needs is missing, prints a
message that says what and how to fix it, and exits nonzero: never a traceback."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from snakemake_executor_plugin_htcannex.cli import build_parser

HTCANNEX = Path(sys.executable).parent / "htcannex"
PROFILES = Path(__file__).resolve().parents[2] / "profiles"
LOCAL, NAIRR = str(PROFILES / "local"), str(PROFILES / "nairr")

# (command line, what the message must say). Each noun and verb of the parser has a case (checked below).
CASES = [
    (["annex", "plan", "--profile", LOCAL], "no Snakefile"),
    (["annex", "plan", "--profile", LOCAL, "-s", "missing/Snakefile"], "no Snakefile"),
    (["annex", "plan", "--profile", "no-such-profile"], "no such Snakemake profile"),
    (["annex", "create", "nosuch", "--profile", LOCAL], "no such site"),
    (["annex", "create", "expanse", "--profile", NAIRR], "CONDOR_CONFIG"),
    (["annex", "list", "--profile", "no-such-profile"], "no such Snakemake profile"),
    (["annex", "list", "--profile", LOCAL], "no embedded pool has run"),
    (["experiment", "plan", "missing.yaml", "--profile", LOCAL], "missing.yaml"),
    (["experiment", "run", "missing.yaml", "--profile", LOCAL], "missing.yaml"),
    (["pool", "start", "--spool", "/proc/nope"], "--spool"),
    (["pool", "stop", "--idle-exit", "soon"], "invalid float value"),
    (["pool", "status", "--idle-exit", "soon"], "invalid float value"),
    (["profiles", "install", "nope"], "unknown profile"),
    (["profiles", "install", "--dest", "/proc/nope"], "/proc/nope"),
    (["report", "missing.log"], "missing.log does not exist"),
    (["report", "--threshold", "2"], "invalid fraction value"),
    (["status"], "no .htcannex directory"),
    (["stop"], "no driver was submitted"),
    (["submit"], "give Snakemake's arguments"),
    (["submit", "--profile", NAIRR], "CONDOR_CONFIG"),
    (["why", "x"], "not a job id"),
    (["why", "12.0", "--profile", NAIRR], "CONDOR_CONFIG"),
    (["why", "12.0", "--profile", LOCAL], "no embedded pool has run"),
    (["why", "12.0", "--schedd", "no-such-schedd"], "no-such-schedd"),
    ([], "required"),
]


@pytest.fixture
def bare_env(tmp_path):
    """A machine with no HTCondor (an empty HTCondor configuration) and no embedded pool named."""
    (tmp_path / "condor_config").write_text("")
    env = {name: value for name, value in os.environ.items() if name != "HTCANNEX_POOL_DIR"}
    env.update(CONDOR_CONFIG=str(tmp_path / "condor_config"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    return env


@pytest.mark.parametrize("argv, says", CASES, ids=[" ".join(argv[:3]) or "(none)" for argv, _ in CASES])
def test_a_bad_command_line_gets_a_message_not_a_traceback(argv, says, tmp_path, bare_env):
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run([str(HTCANNEX), *argv], cwd=work, env=bare_env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    assert says in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(("htcannex", "usage: htcannex"))
    # Nothing that only looks (why, status) leaves an embedded pool behind where it ran.
    assert not (work / ".htcannex").exists()


def test_every_command_has_a_bad_arguments_case():
    nouns = next(action for action in build_parser()._actions if action.dest == "noun").choices
    commands = set()
    for noun, parser in nouns.items():
        verbs = [action.choices for action in parser._actions if action.dest == "verb"]
        commands |= {f"{noun} {verb}" for verb in verbs[0]} if verbs else {noun}
    covered = {" ".join(argv[:2]) if " ".join(argv[:2]) in commands else argv[0] for argv, _ in CASES if argv}
    assert commands <= covered, f"no bad-arguments case for {sorted(commands - covered)}"


def test_the_readme_real_annex_line_without_a_schedd_says_what_is_missing(tmp_path, bare_env):
    """README: `htcannex profiles install`, then `snakemake --executor htcannex --profile nairr ...`."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "Snakefile").write_text('rule a:\n    output: "a.txt"\n    shell: "touch {output}"\n')
    subprocess.run([str(HTCANNEX), "profiles", "install"], env=bare_env, check=True, capture_output=True)
    result = subprocess.run([str(HTCANNEX.parent / "snakemake"), "--executor", "htcannex", "--profile", "nairr"],
                            cwd=work, env=bare_env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and "HTCondorException" not in result.stderr
    for fix in ("CONDOR_CONFIG", "access point", "--profile profiles/local"):
        assert fix in result.stderr
