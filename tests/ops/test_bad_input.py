"""A malformed profile or site catalogue, as the user sees it through the snakemake CLI:
one clear error naming the file or setting, the key and the fix, and no Python traceback.

(Catalogue mistakes key by key are tested on load_catalogue in tests/test_catalogue.py;
here each kind of mistake is checked once end to end.)
"""
import re
import subprocess
from pathlib import Path

import pytest

from .snakemake_runs import TOO_BIG, run_snakemake, unwritable_by_the_job_owner

PROFILE = "executor: htcannex\nhtcannex-config: htcannex.yaml\njobs: 1\n"

CASES = {
    "profile-not-yaml": (PROFILE + "default-resources: [mem_mb=100\n", None,
                         ["Couldn't parse config file", "config.yaml", "line"]),
    "profile-bad-choice": (PROFILE + "htcannex-hold-policy: sometimes\n", None,
                           ["--htcannex-hold-policy", "invalid choice: 'sometimes'", "release-transient"]),
    "profile-unknown-setting": (PROFILE + "htcannex-retry-everywhere: 3\n", None,
                                ["unrecognized arguments: --htcannex-retry-everywhere"]),
    "profile-bad-duration": (PROFILE + "htcannex-idle-timeout: soon\n", None,
                             ["--htcannex-idle-timeout: 'soon' is not a duration", "30m"]),
    "profile-names-missing-catalogue": (PROFILE.replace("htcannex.yaml", "nowhere.yaml"), None,
                                        ["nowhere.yaml: (file): does not exist", "Fix: point --htcannex-config"]),
    "catalogue-bad-size": (None, ("memory: 2GB", "memory: lots"),
                           ["htcannex.yaml: sites.a.memory: 'lots' is not a size", "Fix: write e.g. 92GB"]),
    "catalogue-unknown-site-in-rotation": (None, ("sites: [a, b, c]", "sites: [a, b, mars]"),
                                           ["htcannex.yaml: rotation.chunk.sites", "mars"]),
    "catalogue-not-yaml": (None, ("pool: local", "pool: [local"),
                           ["htcannex.yaml: (file): is not valid YAML", "Fix: correct the syntax"]),
    # a named schedd no collector knows (here: no HTCondor configured at all)
    "catalogue-unknown-schedd": (None, ("pool: local", "pool: ap40.example.org"),
                                 ["schedd 'ap40.example.org' is not known to the collector",
                                  "condor_status -schedd"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("profile, catalogue_edit, words", CASES.values(), ids=CASES.keys())
def test_bad_profile_or_catalogue_is_one_clear_error(workdir, user_env, profile, catalogue_edit, words):
    if profile is not None:
        (workdir / "config.yaml").write_text(profile)
    if catalogue_edit is not None:
        catalogue = workdir / "htcannex.yaml"
        old, new = catalogue_edit
        assert old in catalogue.read_text()
        catalogue.write_text(catalogue.read_text().replace(old, new))
    result = run_snakemake(workdir, user_env, "copied.txt", timeout=60)
    assert result.returncode != 0
    for word in words:
        assert word in result.stderr, result.stderr[-2000:]
    assert "Traceback (most recent call last)" not in result.stderr
    assert not (workdir / ".htcannex" / "jobs.log").exists()  # nothing was submitted


@pytest.mark.slow
def test_pool_default_without_an_access_point_says_what_default_means(workdir, user_env):
    catalogue = workdir / "htcannex.yaml"
    catalogue.write_text(catalogue.read_text().replace("pool: local", "pool: default"))
    # No HTCondor configuration: this machine is no access point.
    result = run_snakemake(workdir, {**user_env, "CONDOR_CONFIG": "/dev/null"}, "copied.txt", timeout=60)
    assert result.returncode != 0
    assert "pool: default means the schedd of the HTCondor access point this runs on" in result.stderr
    assert "use the local profile (--profile profiles/local, `pool: local`): the embedded pool" in result.stderr
    assert "Traceback (most recent call last)" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("target, lacks", [
    ("no-tool.txt", "a command the job runs is not on its PATH"),
    ("no-module.txt", "its Python has no module 'htcannex_no_such_module'"),
])
def test_an_execute_side_without_the_software_is_named(workdir, user_env, target, lacks):
    result = run_snakemake(workdir, user_env, target, extra=["--retries", "0"], timeout=120)
    assert result.returncode != 0
    assert f"The execute side lacks the workflow's software: {lacks}" in result.stderr, result.stderr[-3000:]
    assert "--htcannex-container-image" in result.stderr


@pytest.mark.slow
def test_a_command_killed_by_sigkill_without_a_hold_is_named_with_its_memory(workdir, user_env):
    # What an out-of-memory killer does where no cgroup limit holds the job (annexes and glideins).
    result = run_snakemake(workdir, user_env, "killed.txt", extra=["--retries", "0"], timeout=120)
    assert result.returncode != 0
    said = re.search(r"The job exited 137 \(128 \+ SIGKILL: a command in it was killed\) and HTCondor did not "
                     r"hold it: .* out-of-memory killer\. HTCondor last measured (\d+) MB of the 300 MB requested",
                     result.stderr)
    assert said, result.stderr[-3000:]
    assert 200 <= int(said.group(1)) < 300  # the 200 MB it held, as the pool's cgroup-like sampling saw them
    assert "raise the rule's mem_mb (request_memory)" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("snakefile, target, said", [
    (None, "copied.txt", ["(HoldReasonCode 12, HoldReasonSubCode 13)",
                          "the submit directory is not writable by the user the job runs as"]),
    # Without the event log the jobs' states come from the schedd: an idle job is still looked at (one that no
    # slot can run waited in silence for good before).
    (TOO_BIG, "big.txt", ["has been idle for over 1 s, and no slot can run it",
                          "FAILS (job Requirements) TARGET.Memory >= RequestMemory"]),
], ids=["outputs-held", "no-slot-can-run"])
def test_a_submit_directory_the_job_owner_cannot_write_is_named(workdir, user_env, snakefile, target, said):
    if snakefile is not None:
        (workdir / "Snakefile").write_text(snakefile)
    with unwritable_by_the_job_owner(workdir):
        result = run_snakemake(workdir, user_env, target, extra=["--retries", "0"], timeout=120)
    assert result.returncode != 0
    assert "HTCondor has not created the event log" in result.stderr, result.stderr[-3000:]
    for line in said:
        assert line in result.stderr, result.stderr[-3000:]


@pytest.mark.slow
def test_bad_workflow_config_names_the_key_and_the_schema(tmp_path, user_env):
    snakefile = Path(__file__).parents[2] / "workflows" / "protein_lm" / "Snakefile"
    result = subprocess.run(["snakemake", "-n", "-s", str(snakefile), "--config", 'train={"lr": "fast"}'],
                            cwd=tmp_path, env=user_env, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr  # a dry run reports a Snakefile error on stdout
    assert result.returncode != 0
    assert "config key 'train.lr': 'fast' is not of type 'number'. Fix it to match" in output, output[-2000:]
    assert "schema.yaml" in output and "Traceback (most recent call last)" not in output
