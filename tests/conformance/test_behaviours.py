"""The HTCondor behaviours htcannex relies on, written once against the schedd/collector seam and run
on every backend (conftest.py): the embedded pool must do what a real HTCondor does.

Each test submits small /bin/sh jobs through `schedd.submit(htcondor2.Submit)` and judges what the
user relies on: the job's event log (read with htcondor2.JobEventLog), the files that come back,
the queue and the history. Sources for each behaviour: the fidelity table in docs/pool.md.
"""
import os
import sys
import textwrap
import time
from pathlib import Path

import classad2
import htcondor2
import pytest

from htcondor_codes import schedd_memory_usage_mb, schedd_rounded
from snakemake_executor_plugin_htcannex.submit import shared_cluster
from snakemake_executor_plugin_htcannex.submit.description import quote_new_syntax
from snakemake_executor_plugin_htcannex.track.holds import Hold, HoldKind
from snakemake_executor_plugin_htcannex.submit.transfer_names import remap_entry
from snakemake_executor_plugin_htcannex.submit_language import literal

from waiting import wait_until

JobEventType = htcondor2.JobEventType
PROTEIN_LM_SCRIPTS = Path(__file__).resolve().parents[2] / "workflows" / "protein_lm" / "scripts"
OLD = 1_600_000_000  # 2020-09-13: an input mtime no transfer may keep
TRIES_FOR_A_MISSED_PEAK = 6  # each misses a 2-s peak with a chance of about 1/2 (real pool) to 13/15


def script(directory: Path, name: str, body: str) -> str:
    path = directory / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    # HTCondor resolves a relative `executable` against the submitter's working directory, not
    # `initialdir` (real pool: hold 13/2 "reading from file <cwd>/job.sh: (errno 2)").
    return str(path)


def submit(backend, directory: Path, executable: str, **commands) -> str:
    description = {"executable": executable, "initialdir": str(directory), "log": str(directory / "job.log"),
                   "output": "out", "error": "err", "should_transfer_files": "YES",
                   "when_to_transfer_output": "ON_EXIT", "request_memory": "64MB", "request_disk": "10MB",
                   # HTCondor starts a job without PATH; the scripts use sh, stat, sleep, python3
                   "environment": '"PATH=/usr/local/bin:/usr/bin:/bin"', **commands}
    description = {command: value for command, value in description.items() if value is not None}  # None: left out
    result = backend.schedd.submit(htcondor2.Submit(description))
    return f"{result.cluster()}.{result.first_proc()}"


def events(directory: Path, job_id: str) -> list:
    log = directory / "job.log"
    if not log.exists():
        return []
    cluster, proc = (int(part) for part in job_id.split("."))
    return [event for event in htcondor2.JobEventLog(str(log)).events(0)
            if (event.cluster, event.proc) == (cluster, proc)]


def wait_for_event(backend, directory: Path, job_id: str, kind, count: int = 1):
    def found():
        matching = [event for event in events(directory, job_id) if event.type == kind]
        return matching if len(matching) >= count else None
    return wait_until(found, backend.patience_s, f"{count} {kind.name} event(s) of job {job_id}", every_s=0.2)[-1]


def job_ad(backend, job_id: str, projection=()) -> dict:
    cluster, proc = job_id.split(".")
    constraint = f"ClusterId == {cluster} && ProcId == {proc}"
    ads = backend.schedd.query(constraint, list(projection))
    return ads[0] if ads else None


def in_history(backend, job_id: str, projection=("JobStatus",)):
    cluster, proc = job_id.split(".")
    constraint = f"ClusterId == {cluster} && ProcId == {proc}"
    return wait_until(lambda: list(backend.schedd.history(constraint, list(projection), 1)),
                      backend.patience_s, f"job {job_id} in the history")[0]


def remove(backend, job_id: str):
    backend.schedd.act(htcondor2.JobAction.Remove, job_id, "conformance test cleanup")


def test_a_job_runs_and_its_exit_code_is_logged(backend):
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", "echo hello; exit 3\n"))
    assert wait_for_event(backend, directory, job, JobEventType.SUBMIT)
    terminated = wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
    assert terminated["TerminatedNormally"] and terminated["ReturnValue"] == 3
    finished = in_history(backend, job, ["JobStatus", "ExitCode"])
    assert (finished["JobStatus"], finished["ExitCode"]) == (4, 3)
    assert (directory / "out").read_text() == "hello\n"


@pytest.mark.parametrize("body, normally, code", [
    ("kill -9 $$\n", False, 9),  # the job's own process: TerminatedBySignal
    ("python3 -c 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'\n", True, 137),  # a command in it
])
def test_a_job_killed_by_sigkill_is_logged_with_its_memory_and_request(backend, body, normally, code):
    # What failure_hints.py reads when an out-of-memory killer ends a job that no cgroup limit held.
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", body), request_memory="300MB")
    terminated = wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
    assert terminated["TerminatedNormally"] is normally
    assert terminated["TerminatedBySignal" if not normally else "ReturnValue"] == code
    assert terminated["RequestMemory"] == 300 and isinstance(terminated["MemoryUsage"], int)


def test_a_job_runs_on_the_annex_it_targets_and_the_execute_event_says_where(backend):
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", """\
        grep -i '^AnnexName' "$_CONDOR_MACHINE_AD" > machine.txt
        """)
    job = submit(backend, directory, executable, transfer_output_files="machine.txt",
                 **{"MY.TargetAnnexName": '"htcannex-delta"', "ulog_execute_attrs": "AnnexName"})
    executed = wait_for_event(backend, directory, job, JobEventType.EXECUTE)
    wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
    # What the shadow writes: SlotName, the scratch directory, the slot's resources, and the
    # machine attributes the job asked for with ulog_execute_attrs.
    assert executed["SlotName"]
    props = executed["ExecuteProps"]
    assert props["AnnexName"] == "htcannex-delta"
    assert all(name in props for name in ("CondorScratchDir", "Cpus", "Memory", "Disk"))
    # The slot it ran in: a real pool carves a dynamic slot of the request rounded up (64 MB -> 128
    # on 25.14.0), the embedded pool hands over the annex's whole slot; both at least the request.
    assert 64 <= props["Memory"] <= 1024
    # The job itself learns its annex from the machine ad HTCondor hands it.
    assert "htcannex-delta" in (directory / "machine.txt").read_text()


def test_the_execute_event_has_no_annex_name_unless_the_job_asks(backend):
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", "exit 0\n"),
                 **{"MY.TargetAnnexName": '"htcannex-expanse"'})
    executed = wait_for_event(backend, directory, job, JobEventType.EXECUTE)
    assert "AnnexName" not in executed["ExecuteProps"] and "AnnexName" not in executed


def test_a_job_whose_annex_is_not_up_stays_idle(backend):
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", "exit 0\n"),
                 **{"MY.TargetAnnexName": '"htcannex-nowhere"'})
    try:
        # Several negotiation cycles: nothing may run it, neither an annex slot nor a plain one.
        time.sleep(backend.negotiation_s)
        assert job_ad(backend, job, ["JobStatus"])["JobStatus"] == 1
        assert JobEventType.EXECUTE not in [event.type for event in events(directory, job)]
    finally:
        remove(backend, job)


def _words(expression) -> str:
    return " ".join(str(expression).split()).lower()


def test_a_slot_judges_every_request_and_a_job_names_its_cores_only_when_it_asks_more_than_one(backend):
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", "exit 0\n")
    one, many = (submit(backend, directory, executable, request_cpus=cpus, hold="true") for cpus in ("1", "64"))
    try:
        # condor_submit writes a cores clause only above one core; the slots' own Requirements judge every
        # request, so a job asking 64 cores matches no 1-core slot whatever its Requirements say.
        requirements = {job: _words(job_ad(backend, job, ["Requirements"])["Requirements"]) for job in (one, many)}
        assert "requestcpus" not in requirements[one]
        assert "target.cpus >= requestcpus" in requirements[many]
        slots = backend.collector.query(htcondor2.AdTypes.Startd, "true", ["Name", "Requirements",
                                                                         "WithinResourceLimits"])
        assert slots
        for slot in slots:
            assert _words(slot["Requirements"]) == "start && withinresourcelimits", slot["Name"]
            assert "target.requestcpus <= my.cpus" in _words(slot["WithinResourceLimits"]), slot["Name"]
            assert "target.requestmemory <= my.memory" in _words(slot["WithinResourceLimits"]), slot["Name"]
    finally:
        for job in (one, many):
            remove(backend, job)


def test_a_job_s_requirements_ask_a_slot_for_its_file_transfer_as_condor_submit_writes_them(backend):
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", "exit 0\n")
    (directory / "in.txt").write_text("input\n")
    # What htcannex writes for a chunk that hands its checkpoint on through OSDF, and the shared-filesystem kinds.
    transferring = submit(backend, directory, executable, transfer_input_files="in.txt, osdf:///ospool/run/ckpt-1.pt",
                          when_to_transfer_output="ON_SUCCESS", preserve_relative_paths="true", hold="true")
    shared, either, unsaid = (submit(backend, directory, executable, should_transfer_files=should, hold="true",
                                     when_to_transfer_output=when)
                              for should, when in (("NO", None), ("IF_NEEDED", "ON_EXIT"), (None, None)))
    try:
        ads = {job: job_ad(backend, job) for job in (transferring, shared, either, unsaid)}
        requirements = {job: _words(ad["Requirements"]) for job, ad in ads.items()}
        # A 25.12+ starter judges the disk itself; checkpoint files, relative paths and ON_SUCCESS need 8.9.7;
        # an osdf:// URL needs a plugin that serves osdf.
        assert ('(versionge(split(target.condorversion)[1],"25.12.0") || (target.disk >= requestdisk))'
                in requirements[transferring])
        assert ('(target.hasfiletransfer && versioncmp(split(target.condorversion)[1],"8.9.7") >= 0 && '
                'stringlistimember("osdf",target.hasfiletransferpluginmethods))') in requirements[transferring]
        assert ads[transferring]["WantTransferPluginMethods"] == "osdf"
        assert "FileSystemDomain" not in ads[transferring]
        assert requirements[shared].endswith("&& (target.filesystemdomain == my.filesystemdomain)")
        assert "WhenToTransferOutput" not in ads[shared]  # nothing comes back
        assert requirements[either].endswith("&& ((target.filesystemdomain == my.filesystemdomain) || "
                                             "(target.hasfiletransfer))")
        assert ads[either]["ShouldTransferFiles"] == "IF_NEEDED"
        assert (ads[unsaid]["ShouldTransferFiles"], requirements[unsaid]) == ("IF_NEEDED", requirements[either])
        slots = backend.collector.query(htcondor2.AdTypes.Startd, "true", [])
        assert slots
        for slot in slots:
            # Every starter transfers files, checkpoints too, and is recent; the slots share the submit machine's
            # filesystem here, so a shared-filesystem job matches them.
            assert (slot["HasFileTransfer"], slot["HasSelfCheckpointTransfers"]) == (True, True), slot["Name"]
            version = classad2.ExprTree('versionGE(split(TARGET.CondorVersion)[1], "25.12.0")')
            assert version.eval(scope=ads[transferring], target=slot) is True, slot["CondorVersion"]
            assert slot["FileSystemDomain"] == ads[shared]["FileSystemDomain"] == ads[either]["FileSystemDomain"]
    finally:
        for job in (transferring, shared, either, unsaid):
            remove(backend, job)


def test_without_request_disk_a_job_asks_condor_submit_s_default_sized_by_what_it_transfers(backend):
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", "exit 0\n")
    (directory / "in.bin").write_bytes(b"x" * 1_500_000)  # 1,465 KiB, rounded up
    (directory / "data").mkdir()
    (directory / "data" / "a.bin").write_bytes(b"y" * 2048)
    job = submit(backend, directory, executable, request_disk=None, hold="true",
                 transfer_input_files="in.bin, data, osdf:///ospool/run/ckpt-1.pt")  # a URL counts 0
    try:
        ad = job_ad(backend, job)
        assert Path(executable).stat().st_size <= 1024  # 1 KiB
        # 1 + 1,465 + 2 KiB, which the schedd stores rounded up to a quarter of its order of magnitude.
        assert (ad["ExecutableSize"], ad["DiskUsage_RAW"], ad["DiskUsage"], ad["TransferInputSizeMB"]) == (
            1, 1468, 1500, 2)
        # JOB_DEFAULT_REQUESTDISK: MAX({1024, (TransferInputSizeMB+1) * 1.25}) * 1024 KiB, an expression in the ad.
        request = classad2.ExprTree(str(ad["RequestDisk"]))
        assert request.eval(scope=ad) == 1024 * 1024
        assert request.eval(scope=classad2.ClassAd({"TransferInputSizeMB": 2000})) == 2001 * 1.25 * 1024
        assert '(versionge(split(target.condorversion)[1],"25.12.0") || (target.disk >= requestdisk))' in _words(
            ad["Requirements"])
    finally:
        remove(backend, job)


def test_a_container_job_is_a_vanilla_job_that_asks_for_a_runtime_and_brings_its_image_as_condor_submit_writes_it(
        backend):
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", "exit 0\n")
    (directory / "in.txt").write_text("input\n")
    (directory / "image.sif").write_text("not really an image")
    # What htcannex writes: a .sif beside the inputs, from OSDF, a registry image; and on a shared filesystem.
    sif, fetched, docker = (submit(backend, directory, executable, universe="container", container_image=image,
                                   transfer_input_files="in.txt", hold="true")
                            for image in ("image.sif", "osdf:///ospool/images/train.sif", "docker://python:3.11"))
    shared = submit(backend, directory, executable, universe="container", container_image="image.sif",
                    should_transfer_files="NO", when_to_transfer_output=None, transfer_container="false", hold="true")
    jobs = (sif, fetched, docker, shared)
    try:
        ads = {job: job_ad(backend, job) for job in jobs}
        for job, ad in ads.items():
            assert (ad["JobUniverse"], ad["WantContainer"]) == (5, True), job  # container is a vanilla topping
            assert "target.opsys" not in _words(ad["Requirements"]), job  # the image brings its own
        assert (ads[sif]["TransferInput"], ads[sif]["ContainerImageSource"], ads[sif]["WantSIF"]) == (
            "in.txt,image.sif", "cedar", True)
        assert '(target.arch == "x86_64") && target.hascontainer && target.hassif &&' in _words(
            ads[sif]["Requirements"])
        # An image from a URL is fetched with the inputs and runs under its file name.
        assert (ads[fetched]["TransferInput"], ads[fetched]["ContainerImage"], ads[fetched]["ContainerImageSource"],
                ads[fetched]["WantTransferPluginMethods"]) == (
            "in.txt,osdf:///ospool/images/train.sif", "train.sif", "osdf", "osdf")
        assert (ads[docker]["TransferInput"], ads[docker]["ContainerImageSource"], ads[docker]["WantDockerImage"]) == (
            "in.txt", "docker", True)
        assert "target.hascontainer && target.hasdockerurl" in _words(ads[docker]["Requirements"])
        assert ("TransferInput" not in ads[shared], ads[shared]["ContainerImageSource"],
                ads[shared]["TransferContainer"]) == (True, "local", False)
        # A transferred image and no file transfer contradict each other: condor_submit refuses the job (the
        # 25.14.0 bindings' message is empty there; condor_submit prints "you disabled should_transfer_files").
        with pytest.raises(Exception):
            submit(backend, directory, executable, universe="container", container_image="image.sif",
                   should_transfer_files="NO", when_to_transfer_output=None, hold="true")
        with pytest.raises(Exception, match="container jobs require a container_image"):
            submit(backend, directory, executable, universe="container", hold="true")
    finally:
        for job in jobs:
            remove(backend, job)


def test_file_transfer_gives_inputs_the_transfer_time_and_remaps_outputs(backend):
    directory = backend.submit_dir()
    for name, mtime in (("a.txt", OLD), ("b.txt", OLD + 366 * 86400)):
        (directory / name).write_text(name)
        os.utime(directory / name, (mtime, mtime))
    executable = script(directory, "job.sh", """\
        stat -c '%n %Y' a.txt b.txt > mtimes.txt
        echo result > result.txt
        echo old > old.txt
        touch -d @1000000000 old.txt
        """)
    (directory / "results").mkdir(mode=0o777)
    (directory / "results").chmod(0o777)
    before = int(time.time())
    job = submit(backend, directory, executable, transfer_input_files="a.txt,b.txt",
                 transfer_output_files="mtimes.txt,result.txt,old.txt",
                 transfer_output_remaps='"result.txt = results/renamed.txt"')
    wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
    seen = dict(line.split() for line in (directory / "mtimes.txt").read_text().splitlines())
    # Both inputs arrived with the transfer's second, not their own dates (2020, 2021).
    assert seen["a.txt"] == seen["b.txt"] and int(seen["a.txt"]) >= before
    # Outputs are written afresh on the access point: not the sandbox's mtime (2001).
    assert (directory / "old.txt").stat().st_mtime >= before
    assert (directory / "results" / "renamed.txt").read_text() == "result\n"
    assert not (directory / "result.txt").exists()


def test_an_absolute_input_directory_with_a_trailing_slash_brings_its_empty_directories(backend):
    """What output_directories.py relies on: the tree's subdirectories arrive at their base names
    under the sandbox, even with preserve_relative_paths (it keeps relative paths only), and the
    job writes its outputs into them without making a directory."""
    directory = backend.submit_dir()
    tree = directory / ".htcannex" / "output-dirs" / "0123"
    for made in ("results/run1", "logs"):
        (tree / made).mkdir(parents=True)
    executable = script(directory, "job.sh", """\
        echo result > results/run1/out.txt && echo log > logs/job.log && ls -a .htcannex 2> /dev/null > leaked.txt
        exit 0
        """)
    job = submit(backend, directory, executable, transfer_input_files=f"{tree}/", preserve_relative_paths="true",
                 transfer_output_files="results/run1/out.txt, logs/job.log, leaked.txt")
    terminated = wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
    assert terminated["ReturnValue"] == 0, (directory / "err").read_text()
    assert (directory / "results" / "run1" / "out.txt").read_text() == "result\n"
    assert (directory / "logs" / "job.log").read_text() == "log\n"
    assert (directory / "leaked.txt").read_text() == ""  # nothing of the tree's own path in the sandbox


def test_with_preserve_relative_paths_a_relative_directory_s_trailing_slash_is_ignored(backend):
    directory = backend.submit_dir()
    (directory / "indir" / "sub").mkdir(parents=True)
    (directory / "indir" / "sub" / "b.txt").write_text("b\n")
    executable = script(directory, "job.sh", "cat indir/sub/b.txt > seen.txt\n")
    job = submit(backend, directory, executable, transfer_input_files="indir/", preserve_relative_paths="true",
                 transfer_output_files="seen.txt")
    terminated = wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
    assert terminated["ReturnValue"] == 0, (directory / "err").read_text()
    assert (directory / "seen.txt").read_text() == "b\n"


def test_names_a_transfer_list_cannot_hold_travel_under_stand_ins_as_htcannex_writes_them(backend):
    """What transfer_names.py relies on: an input sent through a symbolic link with a plain name (the file it
    points to arrives), and a listed directory remapped to a directory whose name has a comma, '=', ';', a
    space at its end and a non-ASCII letter: it is made under its remapped name, each file below it remapped
    by its parent; a link to a directory is not sent (the job is held)."""
    directory = backend.submit_dir()
    awkward = "lr=0.1,wd=0.01; é "
    (directory / awkward).mkdir(mode=0o777)
    (directory / awkward).chmod(0o777)
    (directory / awkward / "in, 1.txt").write_text("input\n")
    (directory / "names").mkdir()
    (directory / "names" / "in").symlink_to(directory / awkward / "in, 1.txt")
    executable = script(directory, "job.sh", """\
        mkdir -p stand-in/sub && cat names/in > 'stand-in/out, 1.txt' && echo deep > stand-in/sub/deep.txt
        """)
    job = submit(backend, directory, executable, transfer_input_files="names/in", preserve_relative_paths="true",
                 transfer_output_files="stand-in",
                 transfer_output_remaps=f'"{literal(remap_entry("stand-in", awkward))}"')
    terminated = wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
    assert terminated["ReturnValue"] == 0, (directory / "err").read_text()
    assert (directory / awkward / "out, 1.txt").read_text() == "input\n"
    assert (directory / awkward / "sub" / "deep.txt").read_text() == "deep\n"
    assert not (directory / "stand-in").exists()
    (directory / "names" / "dir").symlink_to(directory / awkward)
    linked = submit(backend, directory, executable, transfer_input_files="names/dir", preserve_relative_paths="true")
    held = wait_for_event(backend, directory, linked, JobEventType.JOB_HELD)
    assert held["HoldReasonCode"] == 13, held.get("HoldReason")


def test_a_job_submitted_on_hold_waits_until_released(backend):
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", "exit 0\n"), hold="true")
    ad = job_ad(backend, job, ["JobStatus", "HoldReasonCode", "HoldReasonSubCode", "HoldReason"])
    assert ad["JobStatus"] == 5
    assert Hold(ad["HoldReasonCode"], ad.get("HoldReasonSubCode"), ad.get("HoldReason", "")).ours
    backend.schedd.act(htcondor2.JobAction.Release, job, "its annex is up")
    assert wait_for_event(backend, directory, job, JobEventType.JOB_RELEASED)
    assert wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)["ReturnValue"] == 0
    # The hold is in the ad only: HTCondor logs no held event for `hold = true` (real 25.14.0 pool).
    assert not [event for event in events(directory, job) if event.type == JobEventType.JOB_HELD]


def test_a_held_running_job_is_stopped_and_held_by_the_user(backend):
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", "sleep 300\n"))
    try:
        wait_for_event(backend, directory, job, JobEventType.EXECUTE)
        backend.schedd.act(htcondor2.JobAction.Hold, job, "held by the conformance test")
        held = wait_for_event(backend, directory, job, JobEventType.JOB_HELD)
        # The reason given to schedd.act may not reach the log: a real 25.14.0 schedd wrote the held
        # event without HoldReason and left HoldReason "" in the ad. The code is what is relied on.
        assert held["HoldReasonCode"] == 1
        assert Hold(1, held.get("HoldReasonSubCode"), held.get("HoldReason", "")).kind is HoldKind.USER
    finally:
        remove(backend, job)


def test_a_job_over_its_memory_request_is_held_for_memory(backend):
    directory = backend.submit_dir()
    # ~300 MB resident, for a minute, against a 100 MB request.
    executable = script(directory, "job.sh", """\
        exec python3 -c 'import time; block = b"x" * (300 * 2**20); time.sleep(60)'
        """)
    job = submit(backend, directory, executable, request_memory="100MB")
    try:
        held = wait_for_event(backend, directory, job, JobEventType.JOB_HELD)
        hold = Hold(held["HoldReasonCode"], held.get("HoldReasonSubCode"), held.get("HoldReason", ""))
        # 34/102 where cgroups enforce, 26/* from SYSTEM_PERIODIC_HOLD, 21/102 from WANT_HOLD: holds.py
        assert hold.needs_more_memory, hold.headline()
    finally:
        remove(backend, job)


def test_the_schedd_keeps_a_job_s_resident_memory_rounded_and_its_memory_usage_follows_it(backend):
    directory = backend.submit_dir()
    # ~60 MB resident: the starter measures it, the schedd stores it rounded up. Long enough for a real procd to
    # see it (PID_SNAPSHOT_INTERVAL, 15 s: a 12-s job was reported at its 5.8-MB start only); the pool samples
    # every 0.1 s.
    seconds = 25 if backend.name == "htcondor" else 2
    executable = script(directory, "job.sh", f"""\
        exec python3 -c 'import time; block = b"x" * (60 * 2**20); time.sleep({seconds})'
        """)
    job = submit(backend, directory, executable, request_memory="512MB")
    terminated = wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
    ad = in_history(backend, job, ("ResidentSetSize", "ResidentSetSize_RAW", "MemoryUsage", "RequestMemory"))
    measured = ad["ResidentSetSize_RAW"]
    assert 60 * 1024 < measured < 100 * 1024, measured
    assert ad["ResidentSetSize"] == schedd_rounded(measured) > measured
    # MemoryUsage is an expression of the rounded size: what a policy on MemoryUsage > RequestMemory judges.
    assert ad.eval("MemoryUsage") == schedd_memory_usage_mb(measured) == (ad["ResidentSetSize"] + 1023) // 1024
    # The event is the shadow's, which holds what was measured.
    assert terminated["MemoryUsage"] == -(-measured // 1024) < ad.eval("MemoryUsage")


def test_without_cgroups_a_job_s_memory_is_what_the_snapshots_saw(backend_without_cgroups):
    """100 MB from 3 s to 5 s after the job starts: after the procd's snapshot as it starts; the next comes on
    the procd's own clock, every PID_SNAPSHOT_INTERVAL (15 s), at any point of the job's run, so it falls in
    those 2 s in some tries (on the real pool, in 3 of 6) and is missed in the others. With a cgroup the
    starter reads memory.peak and every try would report the 100 MB."""
    backend = backend_without_cgroups
    reported = []
    for _ in range(TRIES_FOR_A_MISSED_PEAK):
        directory = backend.submit_dir()
        executable = script(directory, "job.sh", """\
            exec python3 -c 'import time; time.sleep(3); block = b"x" * (100 * 2**20); time.sleep(2)'
            """)
        job = submit(backend, directory, executable, request_memory="512MB")
        terminated = wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
        measured = in_history(backend, job, ("ResidentSetSize_RAW",))["ResidentSetSize_RAW"]
        # The terminated event's MemoryUsage is the shadow's: what was measured, in MB.
        assert terminated["MemoryUsage"] == -(-measured // 1024)
        reported.append(measured)
        if measured < 50 * 1024:
            break
    assert 0 < min(reported) < 50 * 1024, f"every try reported its 100-MB peak: {reported} KiB"


def held_event_of_a_job(backend, **description) -> dict:
    """The held event of a job that exits 0 and is held for what `description` adds (then removed)."""
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", "exit 0\n"), **description)
    try:
        return wait_for_event(backend, directory, job, JobEventType.JOB_HELD)
    finally:
        remove(backend, job)


def test_a_missing_output_holds_the_job_with_a_transfer_code(backend):
    held = held_event_of_a_job(backend, transfer_output_files="never_written.txt")
    assert (held["HoldReasonCode"], held["HoldReasonSubCode"]) == (12, 2)
    assert "never_written.txt" in held["HoldReason"]
    assert Hold(12, 2, held["HoldReason"]).kind is HoldKind.MISSING_OUTPUT


def test_a_failed_command_missing_its_output_is_held_after_the_rest_came_back(backend):
    # FileTransfer::DoUpload goes on after a file it cannot read and reports the first failure: the job's
    # stdout, stderr and other outputs come back. The empty file put_file sends in the missing one's place
    # is removed where it arrives (ReliSock::get_file): nothing stands in for an output the job never wrote.
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", """\
        echo partial > written.txt
        echo "epoch 1 done"
        echo "ValueError: loss is nan" >&2
        exit 1
        """)
    job = submit(backend, directory, executable, transfer_output_files="written.txt, never_written.txt")
    try:
        held = wait_for_event(backend, directory, job, JobEventType.JOB_HELD)
        assert (held["HoldReasonCode"], held["HoldReasonSubCode"]) == (12, 2) and "never_written.txt" in held["HoldReason"]
        assert (directory / "err").read_text() == "ValueError: loss is nan\n"
        assert (directory / "out").read_text() == "epoch 1 done\n"
        assert (directory / "written.txt").read_text() == "partial\n"
        assert not (directory / "never_written.txt").exists()
    finally:
        remove(backend, job)


def test_an_unwritable_submit_directory_gets_no_log_and_an_output_hold(backend):
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", "echo result > result.txt\n")
    directory.chmod(0o555)  # the job's owner (never root on HTCondor) cannot write here
    try:
        job = submit(backend, directory, executable, transfer_output_files="result.txt")
        projection = ["JobStatus", "HoldReasonCode", "HoldReasonSubCode"]
        ad = wait_until(lambda: (job_ad(backend, job, projection) or {}).get("JobStatus") == 5
                        and job_ad(backend, job, projection), backend.patience_s, f"job {job} held")
        assert (ad["HoldReasonCode"], ad["HoldReasonSubCode"]) == (12, 13)
        assert Hold(12, 13).kind is HoldKind.SUBMIT_DIR_NOT_WRITABLE
        assert not (directory / "job.log").exists()
        remove(backend, job)
    finally:
        directory.chmod(0o777)


def test_a_removed_job_leaves_the_queue_with_an_abort_event(backend):
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", "sleep 300\n"))
    wait_for_event(backend, directory, job, JobEventType.EXECUTE)
    backend.schedd.act(htcondor2.JobAction.Remove, job, "removed by the conformance test")
    # A real 25.14.0 schedd logged the abort without a Reason when the removal came through
    # schedd.act (condor_rm's "via condor_rm (by user ...)" is the CLI's own text).
    assert wait_for_event(backend, directory, job, JobEventType.JOB_ABORTED)
    assert in_history(backend, job)["JobStatus"] == 3
    assert job_ad(backend, job) is None


def test_acting_on_a_job_that_has_left_the_queue_counts_it_not_found(backend):
    # Snakemake's Ctrl-C removes every job it tracks; one may have ended a moment before.
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", "exit 0\n"))
    wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
    in_history(backend, job)
    for spec in (job, [job]):
        result = backend.schedd.act(htcondor2.JobAction.Remove, spec, "cancelled")
        assert (result["TotalNotFound"], result["TotalSuccess"]) == (1, 0)


def test_a_held_job_removed_keeps_its_hold_as_last_hold_reason(backend):
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", "exit 0\n"), hold="true")
    backend.schedd.act(htcondor2.JobAction.Remove, job, "removed while held")
    finished = in_history(backend, job, ["JobStatus", "LastJobStatus", "HoldReasonCode", "LastHoldReasonCode"])
    assert (finished["JobStatus"], finished["LastJobStatus"]) == (3, 5)
    assert classad2.ExprTree("HoldReasonCode is undefined").eval(finished) is True
    assert finished["LastHoldReasonCode"] == 15  # SubmittedOnHold


def test_a_self_checkpointing_job_resumes_from_its_checkpoint_files(backend):
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", """\
        step=$(( $(cat step.txt 2>/dev/null || echo 0) + 1 ))
        echo $step > step.txt
        echo "step $step" >> steps.txt
        [ $step -ge 3 ] && exit 0
        exit 85
        """)
    job = submit(backend, directory, executable, checkpoint_exit_code="85",
                 transfer_checkpoint_files="step.txt,steps.txt", transfer_output_files="steps.txt")
    assert wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)["ReturnValue"] == 0
    assert (directory / "steps.txt").read_text() == "step 1\nstep 2\nstep 3\n"


def test_a_self_checkpointing_job_restarts_in_its_own_sandbox_with_one_execute_event(backend):
    # The marker is no checkpoint file: only a restart in the same sandbox can find it.
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", """\
        pwd >> sandboxes.txt
        echo "run with $*"
        if [ -e step.txt ]; then
            if [ -e marker ]; then echo found > marker_seen.txt; else echo missing > marker_seen.txt; fi
            exit 0
        fi
        echo 1 > step.txt
        touch marker
        exit 85
        """)
    job = submit(backend, directory, executable, arguments="a b", checkpoint_exit_code="85",
                 transfer_checkpoint_files="step.txt,sandboxes.txt",
                 transfer_output_files="sandboxes.txt,marker_seen.txt")
    assert wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)["ReturnValue"] == 0
    assert (directory / "marker_seen.txt").read_text() == "found\n"
    first, second = (directory / "sandboxes.txt").read_text().splitlines()
    assert first == second
    # Same arguments; the restart appends to the job's stdout.
    assert (directory / "out").read_text() == "run with a b\nrun with a b\n"
    logged = events(directory, job)
    assert [event.type for event in logged].count(JobEventType.EXECUTE) == 1
    transfers = [event["Type"] for event in logged if event.type == JobEventType.FILE_TRANSFER]
    Transfer = htcondor2.FileTransferEventType
    # The checkpoint's upload is an output transfer; the restart transfers no inputs.
    assert transfers == [Transfer.IN_STARTED, Transfer.IN_FINISHED, Transfer.OUT_STARTED, Transfer.OUT_FINISHED,
                         Transfer.OUT_STARTED, Transfer.OUT_FINISHED]
    assert in_history(backend, job, ["NumJobStarts"])["NumJobStarts"] == 1


def test_a_self_checkpointing_job_finds_its_checkpoint_exit_code_where_the_workflow_reads_it(backend):
    """protein_lm's training stops at a chunk boundary with the code its job ad names (job_environment.py);
    it must read the attribute condor_submit writes for `checkpoint_exit_code`, or on a real pool it never stops."""
    directory = backend.submit_dir()
    read = "from protein_lm.job_environment import checkpoint_exit_code; print(checkpoint_exit_code())"
    executable = script(directory, "job.sh", f"""\
        {sys.executable} -c '{read}' > code.txt
        """)
    job = submit(backend, directory, executable, checkpoint_exit_code="85", transfer_output_files="code.txt",
                 environment=f'"PATH=/usr/local/bin:/usr/bin:/bin PYTHONPATH={PROTEIN_LM_SCRIPTS}"')
    assert wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)["ReturnValue"] == 0
    assert (directory / "code.txt").read_text() == "85\n", (directory / "err").read_text()


def test_an_evicted_job_goes_back_to_idle_and_runs_again(backend):
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", "sleep 300\n"))
    try:
        wait_for_event(backend, directory, job, JobEventType.EXECUTE)
        backend.schedd.act(htcondor2.JobAction.Vacate, job, "vacated by the conformance test")
        assert wait_for_event(backend, directory, job, JobEventType.JOB_EVICTED)
        # It is matched and started again (a second execute event).
        wait_for_event(backend, directory, job, JobEventType.EXECUTE, count=2)
    finally:
        remove(backend, job)


def test_dollar_values_written_as_literals_reach_the_job_unchanged(backend):
    # condor_submit expands $(...) and $(DOLLAR), the schedd $$(...) at match time (docs/pool.md).
    values = ["$$(Memory)", "$(DOLLAR)", "$(Cluster)", "$ENV(HOME)", "a$b", "$$$(x)", "$$"]
    directory = backend.submit_dir()
    job = submit(backend, directory, script(directory, "job.sh", 'for value in "$@"; do echo "$value"; done\n'),
                 arguments=quote_new_syntax([literal(value) for value in values]))
    terminated = wait_for_event(backend, directory, job, JobEventType.JOB_TERMINATED)
    assert terminated["ReturnValue"] == 0
    assert (directory / "out").read_text().splitlines() == values


def test_dollar_values_written_as_literals_reach_each_proc_of_a_shared_submit_unchanged(backend):
    # A shared submit (submit/shared_cluster.py) carries what differs as item variables, expanded at submit.
    values = ["$$(Memory)", "$(DOLLAR)", "$(Cluster)", "$ENV(HOME)", "a$b", "$$$(x)", "$$", "it's \"q\""]
    directory = backend.submit_dir()
    executable = script(directory, "job.sh", 'for value in "$@"; do echo "$value"; done\n')
    descriptions = [htcondor2.Submit({
        "executable": executable, "initialdir": str(directory), "log": str(directory / "job.log"),
        "output": f"out{proc}", "error": "err", "should_transfer_files": "YES", "when_to_transfer_output": "ON_EXIT",
        "request_memory": "64MB", "request_disk": "10MB", "environment": '"PATH=/usr/local/bin:/usr/bin:/bin"',
        "arguments": quote_new_syntax([literal(value) for value in [str(proc), *values]])}) for proc in range(2)]
    assert shared_cluster.groups(descriptions) == [[0, 1]]
    template, items = shared_cluster.shared(descriptions)
    result = backend.schedd.submit(template, itemdata=iter(items))
    for proc in range(2):
        terminated = wait_for_event(backend, directory, f"{result.cluster()}.{proc}", JobEventType.JOB_TERMINATED)
        assert terminated["ReturnValue"] == 0
        assert (directory / f"out{proc}").read_text().splitlines() == [str(proc), *values]


def test_a_match_time_macro_the_slot_cannot_expand_holds_the_job(backend):
    held = held_event_of_a_job(backend, arguments="$$(HtcannexNoSuchSlotAttribute)")
    assert "Cannot expand $$ expression (HtcannexNoSuchSlotAttribute)" in held["HoldReason"]
