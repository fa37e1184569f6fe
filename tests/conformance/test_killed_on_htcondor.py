"""A command killed by SIGKILL without a hold, through Snakemake on a real HTCondor (the realpool's startds run
unprivileged: no per-job cgroup, as annexes and glideins): the failure is named as an out-of-memory kill with
what HTCondor measured, and the retry asks for twice the memory. tests/ops/test_faults.py runs the same on the
embedded pool. Runs when HTCANNEX_TEST_CONDOR_CONFIG names a personal pool's condor_config, skipped otherwise."""
import pytest
from ops.snakemake_runs import run_snakemake

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("target, rule, said_how", [
    ("killed.txt", "killed", "exited 137 (128 + SIGKILL: a command in it was killed)"),
    # a run: block keeps Snakemake in the job, which exits 1 and says why in the job's stderr
    ("killed-in-snakemake.txt", "killed_in_snakemake", "had a command killed by SIGKILL (its Snakemake says so above)"),
], ids=["command", "under-the-job-s-snakemake"])
def test_on_htcondor_a_command_killed_by_sigkill_is_named_and_retried_with_twice_the_memory(htcondor, workdir, env,
                                                                                            target, rule, said_how):
    # HTCondor writes the event log and the job's stderr as the job's owner (on the realpool htcuser, not root,
    # who runs this): without a logs directory it can write, the stderr the hint reads is lost.
    for directory in (workdir / ".htcannex", workdir / ".htcannex" / "logs"):
        directory.mkdir(mode=0o777)
        directory.chmod(0o777)
    result = run_snakemake(workdir, env, target, extra=["--retries", "1"], timeout=300 + 4 * htcondor.patience_s)
    assert result.returncode != 0
    said = result.stderr
    assert f"{said_how} and HTCondor did not hold it" in said, said[-3000:]
    ads = htcondor.schedd.history(f'HtcannexRule == "{rule}" && Iwd == "{workdir}"', ["RequestMemory"], 10)
    first, second = sorted(ad["RequestMemory"] for ad in ads)
    assert second == 2 * first
    assert f"A retry asks for at least {second} MB (it was killed asking for {first} MB)" in said
