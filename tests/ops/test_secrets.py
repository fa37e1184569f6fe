"""Tokens and passwords never reach job ads, submit files, logs or error messages."""
from pathlib import Path

import pytest

from snakemake_executor_plugin_htcannex.secrets import redact, withhold

from .snakemake_runs import run_snakemake

TOKEN = "fake-bearer-7f3a9c2e5d1b"
PASSWORD = "hunter2-correct-horse"


def files_containing(root: Path, secret: str) -> list:
    needle = secret.encode()
    return [path for path in root.rglob("*") if path.is_file() and needle in path.read_bytes()]


def test_secret_named_variables_are_withheld_but_token_files_pass():
    kept, withheld = withhold({"PATH": "/bin", "BEARER_TOKEN": TOKEN, "BEARER_TOKEN_FILE": "/run/token",
                               "DB_PASSWORD": PASSWORD, "SEED": "3"})
    assert kept == {"PATH": "/bin", "BEARER_TOKEN_FILE": "/run/token", "SEED": "3"}
    assert withheld == ["BEARER_TOKEN", "DB_PASSWORD"]


def test_redaction_masks_values_pairs_and_jwts():
    environment = {"BEARER_TOKEN": TOKEN}
    text = (f"using {TOKEN}; db_password={PASSWORD} \"api_key\": \"k-123456\" "
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln token_file=/run/token "
            "osdf:///ns/ckpt-3.pt?authz=abcdef123456 failed")
    assert redact(text, environment) == ("using [REDACTED]; db_password=[REDACTED] \"api_key\": \"[REDACTED]\" "
                                         "[REDACTED] token_file=/run/token osdf:///ns/ckpt-3.pt?authz=[REDACTED] failed")


@pytest.mark.slow
def test_a_token_in_the_environment_and_the_profile_leaks_nowhere(workdir, user_env, embedded_pool):
    user_env = dict(user_env, BEARER_TOKEN=TOKEN, DB_PASSWORD=PASSWORD)
    # The user asks Snakemake to pass both to jobs.
    result = run_snakemake(workdir, user_env, "copied.txt", extra=["--envvars", "BEARER_TOKEN", "DB_PASSWORD"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "not passing BEARER_TOKEN, DB_PASSWORD to jobs" in result.stderr
    # ... and puts the token in htcannex.yaml's submit commands, where it is refused.
    catalogue = workdir / "htcannex.yaml"
    catalogue.write_text(catalogue.read_text() + f'submit:\n  MY.Auth: "BEARER_TOKEN={TOKEN}"\n')
    (workdir / "copied.txt").unlink()
    refused = run_snakemake(workdir, user_env, "copied.txt")
    assert refused.returncode != 0
    assert "submit.MY.Auth: holds a secret" in refused.stderr
    catalogue.write_text(catalogue.read_text().replace(TOKEN, "see-token-file"))  # the workdir is grepped too

    for secret in (TOKEN, PASSWORD):
        for output in (result.stdout, result.stderr, refused.stdout, refused.stderr):
            assert secret not in output
        assert files_containing(workdir, secret) == []  # .htcannex/, logs, .snakemake/
        assert files_containing(embedded_pool.spool_dir, secret) == []  # queue, history, sandboxes


def test_only_secret_values_are_redacted_not_names_next_to_paths(tmp_path, user_env):
    """A rule named *secret* that fails on /etc/passwd is reported with both words intact."""
    work = tmp_path / "masked"
    work.mkdir()
    for name in ("config.yaml", "htcannex.yaml"):
        (work / name).write_text((Path(__file__).parent / "workflows" / "faults" / name).read_text())
    (work / "Snakefile").write_text(
        'rule write_secret:\n    output: "notes.txt"\n'
        '    shell: "echo \'rule write_secret: /etc/passwd: not readable here\' >&2; exit 3"\n')
    result = run_snakemake(work, dict(user_env, DB_PASSWORD=PASSWORD), "notes.txt", extra=["--retries", "0"])
    assert result.returncode != 0
    assert "rule write_secret: /etc/passwd: not readable here" in result.stderr
    assert "[REDACTED]" not in result.stderr
    assert redact(f"password: {PASSWORD}\nrule write_secret: exited") == "password: [REDACTED]\nrule write_secret: exited"


JWT_TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzd2VlcCJ9.c2lnbmF0dXJlLXZhbHVl"


@pytest.mark.slow
def test_a_refused_job_fails_once_and_its_secret_is_printed_nowhere(workdir, user_env):
    """A rule whose command carries a token is refused before submit: with retries left it is not
    retried (a retry is refused the same way), and Snakemake's report of the failure does not show
    the command."""
    (workdir / "Snakefile").write_text(
        f'rule fetch:\n    output: "fetched.txt"\n    params: token="{JWT_TOKEN}"\n'
        '    shell: "echo \'Authorization: Bearer {params.token}\' > {output}"\n')
    result = run_snakemake(workdir, user_env, "fetched.txt", extra=["--retries", "2"])
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert output.count("Error in rule fetch") == 1, output[-3000:]
    assert "give the job a token file instead" in output
    assert "Trying to restart" not in output
    assert "shell: (withheld: it holds a secret)" in output
    assert JWT_TOKEN not in output
    # Nor in any log: Snakemake's, htcannex's, the jobs' (the Snakefile holds it, and Snakemake's record
    # of the job's params in .snakemake/metadata, as for any executor).
    for logs in (workdir / ".snakemake" / "log", workdir / ".htcannex"):
        assert files_containing(logs, JWT_TOKEN) == []


@pytest.mark.slow
def test_an_impossible_request_fails_once(workdir, user_env):
    """A runtime no JobDurationCategory allows is refused before submit, once."""
    (workdir / "Snakefile").write_text(
        'rule forever:\n    output: "forever.txt"\n    resources: runtime="50h"\n    shell: "touch {output}"\n')
    result = run_snakemake(workdir, user_env, "forever.txt", extra=["--retries", "2"])
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert output.count("jobs must finish within") == 1, output[-3000:]
    assert "Trying to restart" not in output
