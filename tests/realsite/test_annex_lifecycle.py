"""The hard cases of an annex's life, on real annexes (the realsite harness): a batch job left waiting in
Slurm, a pilot that cannot start, a walltime that ends mid-chunk, no terminal for ssh's prompt, Ctrl-C
while an annex is pending. Each chunk is tests/ops/workflows/faults' `chunk` rule, rotated over the
profile's two systems: run 0 chunk 0 goes to expanse first, then delta.
"""
import os
import re
import signal
import subprocess
import time
from contextlib import contextmanager

import pytest
from realsite_harness import REPOSITORY
from test_real_annexes import annex_of_batch_job, with_profile

pytestmark = [pytest.mark.realsite, pytest.mark.slow]

FAULTS = REPOSITORY / "tests" / "ops" / "workflows" / "faults"
IDLE_TIMEOUT = "40s"


def run_chunk(realsite, workdir, *args, timeout=600):
    return realsite.run("snakemake", "--profile", workdir / "profile", "run0-chunk0.txt",
                        "--htcannex-idle-timeout", IDLE_TIMEOUT, *args, cwd=workdir, timeout=timeout, check=False)


def start_chunk_held(realsite, workdir, *args) -> subprocess.Popen:
    """Snakemake running the chunk, which runs until `let_it_finish`."""
    return subprocess.Popen([str(realsite.state / "as-user"), "snakemake", "--profile", str(workdir / "profile"),
                             "run0-chunk0.txt", "--htcannex-idle-timeout", IDLE_TIMEOUT,
                             "--config", f"wait_for={workdir / 'never'}", *args],
                            cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def let_it_finish(run: subprocess.Popen, workdir) -> str:
    """Let the chunk of start_chunk_held finish, wherever it runs now: Snakemake's stderr, once it succeeded."""
    (workdir / "never").touch()
    _, stderr = run.communicate(timeout=600)
    assert run.returncode == 0, stderr[-4000:]
    return stderr


def ran_on(realsite, workdir) -> str:
    """The annex whose pilot ran the chunk (its slot's name carries the pilot's Slurm job)."""
    slot = realsite.run("condor_history", "-constraint", f'Iwd == "{workdir}" && HtcannexRule == "chunk"',
                        "-limit", "1", "-af", "LastRemoteHost").stdout.strip()
    return annex_of_batch_job(realsite)[re.search(r"@slurm(\d+)@", slot)[1]]


@contextmanager
def slurm(realsite, *change, undo):
    """A change to Slurm (scontrol update ...) for the length of a test."""
    env = dict(os.environ, SLURM_CONF=str(realsite.state / "slurm" / "slurm.conf"))
    subprocess.run(["scontrol", "update", *change], check=True, env=env)
    try:
        yield
    finally:
        subprocess.run(["scontrol", "update", *undo], check=True, env=env)


def test_a_batch_job_waiting_in_slurm_past_the_idle_timeout_is_cancelled_and_the_chunk_moves(realsite):
    workdir = with_profile(realsite, FAULTS)
    with slurm(realsite, "PartitionName=shared", "State=DOWN", undo=["PartitionName=shared", "State=UP"]):
        result = run_chunk(realsite, workdir)
    assert result.returncode == 0, result.stderr[-4000:]
    log = result.stderr
    assert re.search(r"annex htcannex-expanse did not come up \(cancelled batch job\(s\) \d+ at Expanse\)",
                     log), log[-4000:]
    assert "Moved it to site delta" in log
    assert ran_on(realsite, workdir) == "htcannex-delta"
    realsite.wait_until_nothing_is_left()


def test_a_pilot_that_cannot_download_htcondor_fails_its_create_and_the_chunk_moves(realsite):
    spark = realsite.state / "libexec" / "annex" / "spark.sh"
    script = spark.read_text()
    spark.write_text(re.sub(r"(?m)^WELL_KNOWN_LOCATION_FOR_BINARIES=.*$",
                            "WELL_KNOWN_LOCATION_FOR_BINARIES=file:///nonexistent/condor-0-x.tar.gz", script))
    try:
        workdir = with_profile(realsite, FAULTS)
        result = run_chunk(realsite, workdir)
    finally:
        spark.write_text(script)
    assert result.returncode == 0, result.stderr[-4000:]
    log = result.stderr
    assert "creating annex htcannex-expanse failed" in log and "Failed to download binaries" in log, log[-4000:]
    assert "Moved it to site delta" in log
    assert ran_on(realsite, workdir) == "htcannex-delta"
    realsite.wait_until_nothing_is_left()


def test_a_slurm_walltime_that_ends_mid_chunk_kills_it_and_its_retry_gets_the_next_sites_annex(realsite):
    # Slurm ends the batch job at its time limit by signalling every process of it: the pilot, and the job the
    # pilot runs. Whichever goes first decides what HTCondor logs: the job terminated by SIGTERM or its shell's
    # 143 (a failure, retried by Snakemake on the next site), or the job evicted (idle, moved to the next site),
    # all three seen. The pilot's own
    # end, before the walltime, evicts (test_the_end_of_an_annex_s_lifetime_...).
    workdir = with_profile(realsite, FAULTS)
    run = start_chunk_held(realsite, workdir)
    try:
        deadline = time.time() + 300
        while not realsite.run("condor_q", "-constraint", 'HtcannexRule == "chunk" && JobStatus == 2',
                               "-af", "ClusterId").stdout.strip():
            assert run.poll() is None, f"snakemake ended before the chunk ran:\n{run.communicate()[1][-3000:]}"
            assert time.time() < deadline, "the chunk never ran"
            time.sleep(2)
        [expanse_job] = [line.split()[0] for line in realsite.slurm_jobs() if " shared " in line]
        # The batch job's walltime is cut below what it has run: Slurm ends it (and the pilot in it) at its
        # next time-limit check, as at the end of an annex's lifetime.
        env = dict(os.environ, SLURM_CONF=str(realsite.state / "slurm" / "slurm.conf"))
        subprocess.run(["scontrol", "update", f"JobId={expanse_job}", "TimeLimit=1"], check=True, env=env)
        deadline = time.time() + 180
        while any(line.startswith(f"{expanse_job} ") for line in realsite.slurm_jobs()):
            assert time.time() < deadline, "Slurm did not end the batch job at its walltime"
            time.sleep(2)
        stderr = let_it_finish(run, workdir)
    finally:
        run.kill()
    killed = "on annex htcannex-expanse (slot slot1_1@slurm" in stderr and (
        "killed by signal 15" in stderr or "exited with return value 143" in stderr)  # SIGTERM, or its shell's 143
    evicted = "its annex htcannex-expanse is gone" in stderr and "Moved it to site delta" in stderr
    assert killed or evicted, stderr[-4000:]
    assert "requested annex htcannex-delta" in stderr
    assert ran_on(realsite, workdir) == "htcannex-delta"
    realsite.wait_until_nothing_is_left()


def test_the_end_of_an_annex_s_lifetime_mid_chunk_evicts_it_and_it_moves_to_the_next_sites_annex(realsite):
    # An annex of 7 minutes: its pilot shuts down 5 minutes (spark.sh's CLEAN_UP_TIME) before the walltime.
    workdir = with_profile(realsite, FAULTS, sites={"expanse": {"lifetime": "7m"}})
    run = start_chunk_held(realsite, workdir, "--set-resources", "chunk:runtime=5")  # minutes: the site admits it in 7
    try:
        evicted = f'HtcannexRule == "chunk" && Iwd == "{workdir}" && NumJobStarts >= 1 && JobStatus == 1'
        deadline = time.time() + 400
        while not realsite.run("condor_q", "-constraint", evicted, "-af", "ClusterId").stdout.strip():
            assert time.time() < deadline and run.poll() is None, "the chunk was never evicted"
            time.sleep(5)
        stderr = let_it_finish(run, workdir)
    finally:
        run.kill()
    assert "its annex htcannex-expanse is gone" in stderr and "Moved it to site delta" in stderr, stderr[-4000:]
    assert ran_on(realsite, workdir) == "htcannex-delta"
    realsite.wait_until_nothing_is_left()


def test_without_a_terminal_a_key_with_a_passphrase_is_said_and_an_open_control_master_is_used(realsite):
    workdir = with_profile(realsite, FAULTS)
    key = workdir / "id_without_passphrase"
    home_key = f"~{realsite.user}/.ssh/id_ed25519"
    realsite.run("sh", "-c", f"cp {home_key} {key} && ssh-keygen -q -p -P '' -N secret -f {home_key}")
    try:
        began = time.time()
        refused = run_chunk(realsite, workdir)
        took = time.time() - began
        assert refused.returncode != 0
        assert "needs a passphrase, a password or a second factor" in refused.stderr, refused.stderr[-4000:]
        assert "htcondor annex login expanse" in refused.stderr
        # It never hangs on a prompt: each of the profile's 3 attempts waited an idle timeout at each site.
        assert took < 3 * 2 * 40 + 120
        # What the message says to do: a shared connection opened where the passphrase could be typed.
        askpass = workdir / "askpass"
        askpass.write_text("#!/bin/sh\necho secret\n")
        askpass.chmod(0o755)
        workdir = with_profile(realsite, FAULTS)
        realsite.run("env", f"SSH_ASKPASS={askpass}", "SSH_ASKPASS_REQUIRE=force", "ssh", "-o", "ControlMaster=auto",
                     "-o", f"ControlPath={realsite.state}/ctl/master-%C", "-o", "ControlPersist=yes", "-fN", "localhost")
        result = run_chunk(realsite, workdir)
        assert result.returncode == 0, result.stderr[-4000:]
        assert ran_on(realsite, workdir) == "htcannex-expanse"
    finally:
        realsite.run("sh", "-c", f"cp {key} {home_key}")
        realsite.close_ssh_masters()
    realsite.wait_until_nothing_is_left()


def test_ctrl_c_while_an_annex_waits_in_slurm_cancels_its_batch_job(realsite):
    workdir = with_profile(realsite, FAULTS)
    with slurm(realsite, "PartitionName=shared", "State=DOWN", undo=["PartitionName=shared", "State=UP"]):
        run = subprocess.Popen([str(realsite.state / "as-user"), "snakemake", "--profile",
                                str(workdir / "profile"), "run0-chunk0.txt"], cwd=workdir,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.time() + 120
            while not any(" shared PENDING " in line for line in realsite.slurm_jobs()):
                assert time.time() < deadline and run.poll() is None, "no batch job was queued"
                time.sleep(1)
            snakemake = subprocess.run(["pgrep", "-u", realsite.user, "-f", f"snakemake --profile {workdir}"],
                                       capture_output=True, text=True).stdout.split()
            for pid in snakemake:
                os.kill(int(pid), signal.SIGINT)
            _, stderr = run.communicate(timeout=120)
        finally:
            run.kill()
    assert re.search(r"annex htcannex-expanse: cancelled batch job\(s\) \d+ at Expanse", stderr), stderr[-4000:]
    realsite.wait_until_nothing_is_left(timeout_s=30)
