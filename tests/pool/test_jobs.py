"""A job's life in the pool: sandbox, file transfer, arguments, environment, event log."""
import getpass
import json
import time

import classad2
import htcondor2
import pytest

from htcannex_pool import PoolRequestError

from pool_helpers import event_types, events, job_status, python_script, script, submit, wait_for_status

JobEventType = htcondor2.JobEventType


def test_round_trip_only_declared_outputs_come_back(pool, submit_dir):
    (submit_dir / "in.txt").write_text("hello\n")
    script(submit_dir, "job.sh", """\
        cat in.txt > out.txt
        echo scratch > not_declared.txt
        echo "ran" ; echo "complaint" >&2
        exit 3
        """)
    result = submit(pool, {"executable": "job.sh", "transfer_input_files": "in.txt",
                           "transfer_output_files": "out.txt", "output": "job.out", "error": "job.err"})
    job_id = f"{result.cluster()}.{result.first_proc()}"
    assert result.num_procs() == 1
    wait_for_status(pool, job_id, 4)
    assert (submit_dir / "out.txt").read_text() == "hello\n"
    assert not (submit_dir / "not_declared.txt").exists()
    assert (submit_dir / "job.out").read_text() == "ran\n"
    assert (submit_dir / "job.err").read_text() == "complaint\n"
    types = event_types(submit_dir / "jobs.log", job_id)
    assert types[0] == JobEventType.SUBMIT and types[-1] == JobEventType.JOB_TERMINATED
    assert JobEventType.EXECUTE in types and types.count(JobEventType.FILE_TRANSFER) == 4
    terminated = events(submit_dir / "jobs.log")[-1]
    assert terminated["ReturnValue"] == 3 and terminated["TerminatedNormally"]
    history = pool.schedd().history(f"ClusterId == {result.cluster()}", ["ExitCode", "JobStatus"])
    assert [(ad["ExitCode"], ad["JobStatus"]) for ad in history] == [(3, 4)]


def test_disk_usage_counts_the_sandbox_files_and_skips_symbolic_links(pool, submit_dir):
    # As HTCondor's starter (Directory::GetDirectorySize): files below the sandbox, links skipped.
    (submit_dir / "big.bin").write_bytes(b"x" * 3 * 1024 * 1024)
    script(submit_dir, "job.sh", f"""\
        mkdir -p sub
        head -c 204800 /dev/zero > sub/written.bin
        ln -s {submit_dir / "big.bin"} link.bin
        """)
    result = submit(pool, {"executable": "job.sh"})
    wait_for_status(pool, f"{result.cluster()}.0", 4)
    [ad] = pool.schedd().history(f"ClusterId == {result.cluster()}", ["DiskUsage"])
    assert 200 <= ad["DiskUsage"] < 1024  # the 200 KiB written, the 3 MiB behind the link not


def test_sandbox_isolation(pool, submit_dir):
    (submit_dir / "secret.txt").write_text("not for the job\n")
    (submit_dir / "in.txt").write_text("x\n")
    script(submit_dir, "job.sh", """\
        pwd > where.txt
        ls -a > listing.txt
        echo "$_CONDOR_SCRATCH_DIR" > scratch.txt
        """)
    result = submit(pool, {"executable": "job.sh", "transfer_input_files": "in.txt"})
    wait_for_status(pool, f"{result.cluster()}.0", 4)
    where = (submit_dir / "where.txt").read_text().strip()
    assert where != str(submit_dir) and not where.startswith(str(submit_dir))
    assert where.startswith(str(pool.spool_dir))
    assert (submit_dir / "scratch.txt").read_text().strip() == where
    listing = (submit_dir / "listing.txt").read_text().split()
    assert "in.txt" in listing and "job.sh" in listing and "secret.txt" not in listing


def test_directory_inputs_with_and_without_trailing_slash(pool, submit_dir):
    for name in ("data", "more"):
        (submit_dir / name).mkdir()
        (submit_dir / name / f"{name}.txt").write_text(name)
    script(submit_dir, "job.sh", "find . -name '*.txt' ! -name found.txt | sort > found.txt\n")
    result = submit(pool, {"executable": "job.sh", "transfer_input_files": "data, more/",
                           "transfer_output_files": "found.txt"})
    wait_for_status(pool, f"{result.cluster()}.0", 4)
    assert (submit_dir / "found.txt").read_text().split() == ["./data/data.txt", "./more.txt"]


def test_without_file_transfer_the_job_runs_in_iwd(pool, submit_dir):
    script(submit_dir, "job.sh", "pwd > where.txt\n")
    result = submit(pool, {"executable": "job.sh", "should_transfer_files": "NO"})
    wait_for_status(pool, f"{result.cluster()}.0", 4)
    assert (submit_dir / "where.txt").read_text().strip() == str(submit_dir)


def test_arguments_quoting_round_trip(pool, submit_dir):
    python_script(submit_dir, "argv.py", """\
        import json, sys
        json.dump(sys.argv[1:], open("argv.json", "w"))
        """)
    # HTCondor's new syntax: '' is a literal ' inside single quotes, "" a literal ".
    arguments = """"plain 'two words' 'it''s' ""quoted"" '' --flag=$(ProcId)\""""
    result = submit(pool, {"executable": "argv.py", "arguments": arguments,
                           "transfer_output_files": "argv.json"})
    wait_for_status(pool, f"{result.cluster()}.0", 4)
    assert json.loads((submit_dir / "argv.json").read_text()) == [
        "plain", "two words", "it's", '"quoted"', "", "--flag=0"]


def test_environment_and_getenv(pool, submit_dir, monkeypatch):
    monkeypatch.setenv("FROM_SUBMITTER", "yes")
    script(submit_dir, "job.sh", 'echo "$GREETING|$FROM_SUBMITTER|$OMP_NUM_THREADS" > env.txt\n')
    first = submit(pool, {"executable": "job.sh", "environment": "\"GREETING='hello world'\"",
                          "request_cpus": "2"})
    wait_for_status(pool, f"{first.cluster()}.0", 4)
    assert (submit_dir / "env.txt").read_text() == "hello world||2\n"
    second = submit(pool, {"executable": "job.sh", "getenv": "FROM_SUBMITTER"})
    wait_for_status(pool, f"{second.cluster()}.0", 4)
    assert (submit_dir / "env.txt").read_text() == "|yes|1\n"


def test_macros_and_itemdata_expand_per_proc(pool, submit_dir):
    script(submit_dir, "job.sh", 'echo "$1" > "out.$2"\n')
    result = submit(pool, {"executable": "job.sh", "arguments": "$(word) $(Cluster).$(Process)"},
                    itemdata=iter([{"word": "alpha"}, {"word": "beta"}]))
    assert result.num_procs() == 2
    for proc, word in enumerate(["alpha", "beta"]):
        wait_for_status(pool, f"{result.cluster()}.{proc}", 4)
        assert (submit_dir / f"out.{result.cluster()}.{proc}").read_text() == f"{word}\n"


def test_count_queues_many_procs(pool, submit_dir):
    script(submit_dir, "job.sh", "exit 0\n")
    result = submit(pool, {"executable": "job.sh", "hold": "true"}, count=5)
    assert (result.first_proc(), result.num_procs()) == (0, 5)
    ads = pool.schedd().query(f"ClusterId == {result.cluster()}", ["ProcId", "JobStatus"])
    assert sorted(ad["ProcId"] for ad in ads) == [0, 1, 2, 3, 4]


def test_osdf_input_and_output_destination(pool, submit_dir):
    (pool.origin_dir / "datasets").mkdir(parents=True)
    (pool.origin_dir / "datasets" / "train.csv").write_text("1,2\n")
    script(submit_dir, "job.sh", "cat train.csv train.csv > doubled.csv\n")
    result = submit(pool, {"executable": "job.sh",
                           "transfer_input_files": "osdf:///datasets/train.csv",
                           "transfer_output_files": "doubled.csv",
                           "output_destination": "osdf:///results/run1"})
    wait_for_status(pool, f"{result.cluster()}.0", 4)
    assert (pool.origin_dir / "results" / "run1" / "doubled.csv").read_text() == "1,2\n1,2\n"
    assert not (submit_dir / "doubled.csv").exists()


def test_output_remaps_to_iwd_and_osdf(pool, submit_dir):
    script(submit_dir, "job.sh", "echo a > a.txt; echo b > b.txt\n")
    result = submit(pool, {"executable": "job.sh", "transfer_output_files": "a.txt, b.txt",
                           "transfer_output_remaps": '"a.txt = renamed/a1.txt; b.txt = osdf:///ckpt/b-1.txt"'})
    wait_for_status(pool, f"{result.cluster()}.0", 4)
    assert (submit_dir / "renamed" / "a1.txt").read_text() == "a\n"
    assert (pool.origin_dir / "ckpt" / "b-1.txt").read_text() == "b\n"


def test_the_pool_advertises_no_container_runtime_so_a_container_job_stays_idle(pool, submit_dir):
    """The pool runs no image: like an execute point without Apptainer, its slots and annexes advertise no
    HasContainer, and a container job matches none (htcannex then names the missing runtime)."""
    pool.create_annex("plain", owner=getpass.getuser(), cpus=1, memory_mb=512, lifetime_s=600)
    script(submit_dir, "job.sh", "exit 0\n")
    (submit_dir / "image.sif").write_text("not really an image")
    result = submit(pool, {"executable": "job.sh", "universe": "container", "container_image": "image.sif",
                           "should_transfer_files": "YES"})
    time.sleep(1.0)
    assert job_status(pool, f"{result.cluster()}.0") == 1  # idle
    slots = pool.collector().query(htcondor2.AdTypes.Startd, "true", ["Name", "HasContainer", "AnnexName"])
    assert {slot.get("AnnexName") for slot in slots} == {None, "plain"}
    assert all("HasContainer" not in slot for slot in slots)


def test_a_container_job_on_a_slot_declaring_a_runtime_gets_its_image_and_is_held_not_run_outside_it(pool,
                                                                                                  submit_dir):
    """A slot may declare a runtime (containers=True) for tests of the container submit path: the job matches,
    its image arrives with its inputs (a missing one holds it, 13), and the starter holds it (6) instead of
    running its executable outside the image."""
    pool.create_annex("apptainer", owner=getpass.getuser(), cpus=1, memory_mb=512, lifetime_s=600, containers=True)
    (pool.origin_dir / "images").mkdir(parents=True)
    (pool.origin_dir / "images" / "train.sif").write_text("not really an image")
    (submit_dir / "image.sif").write_text("not really an image")
    script(submit_dir, "job.sh", 'touch "ran-$1.txt"\n')
    jobs = {name: submit(pool, {"executable": "job.sh", "arguments": name, "universe": "container",
                                "container_image": image, "should_transfer_files": "YES",
                                "+TargetAnnexName": '"apptainer"',
                                "requirements": "TARGET.AnnexName =?= MY.TargetAnnexName"})
            for name, image in (("local", "image.sif"), ("fetched", "osdf:///images/train.sif"),
                                ("missing", "gone.sif"))}
    held = {}
    for name, result in jobs.items():
        wait_for_status(pool, f"{result.cluster()}.0", 5)
        held[name] = pool.schedd().query(f"ClusterId == {result.cluster()}",
                                         ["HoldReason", "HoldReasonCode", "ContainerImage", "ContainerImageSource",
                                          "JobUniverse", "WantContainer"])[0]
    for name in ("local", "fetched"):
        assert held[name]["HoldReasonCode"] == 6 and "runs no container image" in held[name]["HoldReason"]
    assert (held["fetched"]["ContainerImage"], held["fetched"]["ContainerImageSource"]) == ("train.sif", "osdf")
    assert (held["fetched"]["JobUniverse"], held["fetched"]["WantContainer"]) == (5, True)
    assert held["missing"]["HoldReasonCode"] == 13 and "gone.sif" in held["missing"]["HoldReason"]
    assert list(submit_dir.glob("ran-*")) == []


def test_job_ad_follows_condor_submit(pool, submit_dir):
    script(submit_dir, "job.sh", "exit 0\n")
    result = submit(pool, {"executable": "job.sh", "hold": "true", "request_memory": "2GB",
                           "request_disk": "3G", "request_gpus": "1", "gpus_minimum_memory": "8000",
                           "gpus_minimum_capability": "7.5", "MY.JobDurationCategory": '"Long"',
                           "+TargetAnnexName": '"expanse-1"', "requirements": "TARGET.HasFoo == true"})
    ad = pool.schedd().query(f"ClusterId == {result.cluster()}")[0]
    assert (ad["RequestMemory"], ad["RequestDisk"], ad["RequestGPUs"], ad["RequestCpus"]) == (2048, 3 * 1024**2, 1, 1)
    assert ad["JobDurationCategory"] == "Long" and ad["TargetAnnexName"] == "expanse-1"
    require_gpus = ad.lookup("RequireGPUs")
    assert require_gpus.eval(classad2.ClassAd({"GlobalMemoryMb": 8000, "Capability": 7.5})) is True
    assert require_gpus.eval(classad2.ClassAd({"GlobalMemoryMb": 8000, "Capability": 7.0})) is False
    assert require_gpus.eval(classad2.ClassAd({"GlobalMemoryMb": 4000, "Capability": 8.0})) is False
    assert str(ad.lookup("Requirements")).startswith("(TARGET.HasFoo == true) && ")
    assert ad["Owner"] and ad["Cmd"] == str(submit_dir / "job.sh") and ad["Iwd"] == str(submit_dir)
    assert (ad["JobStatus"], ad["HoldReasonCode"]) == (5, 15)  # SubmittedOnHold


@pytest.mark.parametrize("command, value, message", [
    ("request_memory", "12XB", "request_memory = 12XB is invalid"),
    ("request_disk", "lots", "request_disk = lots is invalid"),
    ("arguments", "\"unterminated 'quote\"", "unterminated single quote"),
    ("requirements", "Memory >", "requirements = Memory > is not a valid ClassAd expression"),
    ("universe", "grid", "universe = grid is not supported"),
])
def test_bad_submit_is_rejected_and_nothing_queued(pool, submit_dir, command, value, message):
    script(submit_dir, "job.sh", "exit 0\n")
    with pytest.raises(PoolRequestError, match=message.replace("(", r"\(").replace(")", r"\)")):
        submit(pool, {"executable": "job.sh", command: value})
    assert pool.schedd().query() == []
    assert pool.status()["running"]


@pytest.mark.parametrize("commands, message", [
    ({"should_transfer_files": "NO", "when_to_transfer_output": "ON_EXIT"},
     "when_to_transfer_output = ON_EXIT contradicts should_transfer_files = NO"),
    ({"should_transfer_files": "NO", "transfer_input_files": "in.txt"},
     "name files to transfer, but should_transfer_files = NO"),
])
def test_file_transfer_commands_that_contradict_each_other_are_refused_as_condor_submit_refuses_them(
        pool, submit_dir, commands, message):
    script(submit_dir, "job.sh", "exit 0\n")
    with pytest.raises(PoolRequestError, match=message):
        submit(pool, {"executable": "job.sh", **commands})
    assert pool.schedd().query() == []


def test_missing_executable_is_rejected(pool, submit_dir):
    with pytest.raises(PoolRequestError, match="executable = nothere.sh"):
        submit(pool, {"executable": "nothere.sh"})


def test_preserve_relative_paths_keeps_directories_both_ways(pool, submit_dir):
    (submit_dir / "results" / "r1").mkdir(parents=True)
    (submit_dir / "results" / "r1" / "chunk0.pt").write_text("ckpt0")
    script(submit_dir, "job.sh", "cat results/r1/chunk0.pt > /dev/null && mkdir -p res && echo 1 > res/somedir1.out\n")
    result = submit(pool, {"executable": "job.sh", "preserve_relative_paths": "true",
                           "transfer_input_files": "results/r1/chunk0.pt",
                           "transfer_output_files": "res/somedir1.out"})
    wait_for_status(pool, f"{result.cluster()}.0", 4)
    assert (submit_dir / "res" / "somedir1.out").read_text() == "1\n"
    assert not (submit_dir / "somedir1.out").exists()


def test_on_success_failed_job_returns_only_stdout_and_stderr(pool, submit_dir):
    script(submit_dir, "job.sh", "echo partial > out.txt; echo oops >&2; exit 2\n")
    result = submit(pool, {"executable": "job.sh", "when_to_transfer_output": "ON_SUCCESS",
                           "success_exit_code": "0", "max_retries": "0",
                           "transfer_output_files": "out.txt", "error": "job.err"})
    wait_for_status(pool, f"{result.cluster()}.0", 4)
    assert not (submit_dir / "out.txt").exists()
    assert (submit_dir / "job.err").read_text() == "oops\n"
    terminated = [event for event in events(submit_dir / "jobs.log") if event.type == JobEventType.JOB_TERMINATED]
    assert terminated[0]["ReturnValue"] == 2


def test_osdf_objects_are_immutable(pool, submit_dir):
    (pool.origin_dir / "ckpt").mkdir(parents=True)
    (pool.origin_dir / "ckpt" / "last.pt").write_text("old")
    script(submit_dir, "job.sh", "echo new > last.pt\n")
    result = submit(pool, {"executable": "job.sh", "transfer_output_files": "last.pt",
                           "transfer_output_remaps": '"last.pt = osdf:///ckpt/last.pt"'})
    wait_for_status(pool, f"{result.cluster()}.0", 5)
    held = pool.schedd().query(f"ClusterId == {result.cluster()}", ["HoldReasonCode", "HoldReason"])[0]
    assert held["HoldReasonCode"] == 12 and "immutable" in held["HoldReason"]
    assert (pool.origin_dir / "ckpt" / "last.pt").read_text() == "old"


def test_dollar_macro_gives_a_literal_dollar(pool, submit_dir):
    script(submit_dir, "job.sh", 'echo "$1" > arg.txt\n')
    result = submit(pool, {"executable": "job.sh", "arguments": '"$(DOLLAR)HOME"'})
    wait_for_status(pool, f"{result.cluster()}.0", 4)
    assert (submit_dir / "arg.txt").read_text() == "$HOME\n"


def test_unwritable_log_rejects_the_submit(pool, submit_dir):
    script(submit_dir, "job.sh", "exit 0\n")
    (submit_dir / "a_file").write_text("")
    with pytest.raises(PoolRequestError, match="log = .*a_file/jobs.log cannot be written"):
        submit(pool, {"executable": "job.sh", "log": "a_file/jobs.log"})
    assert pool.schedd().query() == []


def test_size_units_as_condor_submit(pool, submit_dir):
    script(submit_dir, "job.sh", "exit 0\n")
    # (request_memory, request_disk) -> (RequestMemory MiB, RequestDisk KiB)
    cases = {("2048", "1024"): (2048, 1024), ("1.5GB", "1.5G"): (1536, 1572864),
             ("512k", "2MB"): (1, 2048), ("1t", "1tb"): (1048576, 1073741824), ("100 MB", "3 kb"): (100, 3)}
    for (memory, disk), expected in cases.items():
        result = submit(pool, {"executable": "job.sh", "hold": "true", "request_memory": memory,
                               "request_disk": disk})
        ad = pool.schedd().query(f"ClusterId == {result.cluster()}", ["RequestMemory", "RequestDisk"])[0]
        assert (ad["RequestMemory"], ad["RequestDisk"]) == expected, (memory, disk)
