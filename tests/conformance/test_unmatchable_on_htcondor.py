"""A job that no slot can run, through Snakemake on a real HTCondor: said a negotiation cycle after it was
queued (the pool's NEGOTIATOR_INTERVAL), not only at the idle timeout, and left queued until then; Ctrl-C
ends the run and removes it. With the event log, and without one (its state asked of the schedd). tests/ops/test_no_silent_hang.py runs the same on the embedded pool. Runs
when HTCANNEX_TEST_CONDOR_CONFIG names a personal pool's condor_config, skipped otherwise."""
import signal
import threading

import pytest
from ops.snakemake_runs import TOO_BIG, read_until, start_snakemake
from waiting import wait_until

from htcondor_codes import param_seconds

pytestmark = pytest.mark.slow


# Fits every slot's memory, but no slot has 64 cores: the slots' Requirements say so (WithinResourceLimits), as
# does the job's own cores clause (condor_submit writes one above one core).
TOO_MANY_CORES = ('rule big:\n    output: "big.txt"\n    threads: 64\n'
                  '    resources: mem_mb=100\n    shell: "touch {output}"\n')


# Any small rule, in a container image: the realpool's execute points have no Apptainer (no HasContainer).
IN_A_CONTAINER = ('rule big:\n    output: "big.txt"\n    resources: mem_mb=100\n    shell: "touch {output}"\n')


@pytest.mark.parametrize("snakefile, options, fails", [
    (TOO_BIG, (), "FAILS (job Requirements) TARGET.Memory >= RequestMemory"),
    (TOO_MANY_CORES, (), "FAILS (slot Requirements) TARGET.RequestCpus <= MY.Cpus"),
    (IN_A_CONTAINER, ("--htcannex-container-image", "docker://python:3.11"),
     "FAILS (job Requirements) TARGET.HasContainer   [TARGET.HasContainer = undefined]"),
], ids=["too-big", "too-many-cores", "no-container-runtime"])
@pytest.mark.parametrize("event_log", [True, False], ids=["event-log", "no-event-log"])
def test_on_htcondor_a_job_no_slot_can_run_is_said_a_negotiation_cycle_after_it_was_queued(htcondor, workdir, env,
                                                                                          event_log, snakefile, options,
                                                                                          fails):
    (workdir / "Snakefile").write_text(snakefile)
    # HTCondor writes the event log as the job's owner (on the realpool htcuser, not root, who runs this): a
    # .htcannex that Snakemake creates as root has none, and the jobs' states come from the schedd instead.
    if event_log:
        (workdir / ".htcannex").mkdir(mode=0o777)
        (workdir / ".htcannex").chmod(0o777)
    interval = param_seconds("NEGOTIATOR_INTERVAL")  # the pool's: real_htcondor loaded its configuration
    snakemake = start_snakemake(workdir, env, "big.txt", extra=options)
    deadline = threading.Timer(120 + 3 * interval, snakemake.kill)  # a warning that never comes fails the test
    deadline.start()
    try:
        said = read_until(snakemake, "Change what the rule asks for (the FAILS lines), or press Ctrl-C.")
        queued = htcondor.schedd.query(f'HtcannexRule == "big" && JobStatus == 1 && Iwd == "{workdir}"',
                                       ["ClusterId", "ProcId"])
        snakemake.send_signal(signal.SIGINT)
        rest, _ = snakemake.communicate(timeout=120)
    finally:
        deadline.cancel()
        snakemake.kill()
    assert f"has been idle for over {interval:g} s, and no slot can run it" in said, said[-3000:]
    assert fails in said
    assert "it is removed and fails once it has been idle for 600 s (the idle timeout)" in said  # workdir's 10m
    [job] = queued  # not failed at the first look
    assert "Terminating processes on user request" in rest and "Traceback" not in said + rest
    assert ("HTCondor has not created the event log" in said) is not event_log
    job_id = f"{job['ClusterId']}.{job['ProcId']}"
    wait_until(lambda: not htcondor.schedd.query(f"ClusterId == {job['ClusterId']} && JobStatus != 3", ["ProcId"]),
               30, f"Ctrl-C to remove job {job_id}")
