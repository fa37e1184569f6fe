"""On a real pool a job whose whole input is one file in a directory sends it as one transfer item, and its
shell moves it to its path before the command (transfer_items.py): each item more makes a real 25.x shadow
likelier to make the job wait 5 s before it starts. Run here on the embedded pool, which transfers an
absolutely listed input to the top of the sandbox as HTCondor does."""
import subprocess
import time

import pytest

from htcannex_pool import Pool
from snakemake_executor_plugin_htcannex.sites.placement import decided_at
from snakemake_executor_plugin_htcannex.submit.description import JobSpec, SubmitOptions, build_submit
from snakemake_executor_plugin_htcannex.submit.job_spec import JobCommand, sandbox_steps
from snakemake_executor_plugin_htcannex.submit.request import job_request

COPY = "cat {input} > {output}"


def _job(workdir, inputs, outputs, *, real_pool=True, command=None):
    """(the submit description htcannex makes for a job without Snakemake reading `inputs`, the job's argv)."""
    options = SubmitOptions(workdir=workdir, log_path=workdir / ".htcannex" / "jobs.log", few_transfer_items=real_pool)
    options.logs_dir.mkdir(parents=True, exist_ok=True)
    command = command or COPY.format(input=" ".join(inputs), output=outputs[0])
    before, _, flat_input = sandbox_steps({"inputs": inputs, "outputs": outputs},
                                          JobCommand("/bin/sh", command, runs_snakemake=False), options)
    spec = JobSpec("step", 1, ["/bin/sh", "-c", " && ".join(filter(None, (before, command)))], inputs=inputs,
                   outputs=outputs, flat_input=flat_input, ships_workflow_sources=False, needs_output_directories=True,
                   resources={"mem_mb": 64})
    return build_submit(spec, decided_at(None, job_request("step", spec.resources, 1), "step"), options), spec.argv


def _listed(submit) -> list[str]:
    return submit["transfer_input_files"].split(", ") if "transfer_input_files" in submit else []


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    pool = Pool(tmp_path_factory.mktemp("pool"), idle_exit_s=120, cycle_s=0.05, slots=[{"cpus": 1, "memory_mb": 512}])
    pool.ensure_running()
    yield pool
    pool.stop()


def _run(pool, submit):
    cluster = pool.schedd().submit(submit).cluster()
    deadline = time.time() + 30
    while not (done := pool.schedd().history(f"ClusterId == {cluster}", ["ExitCode", "HoldReason"], 1)):
        held = pool.schedd().query(f"ClusterId == {cluster} && JobStatus == 5", ["HoldReason"])
        assert not held, held[0]["HoldReason"]
        assert time.time() < deadline, "the job did not finish within 30 s"
        time.sleep(0.05)
    assert done[0]["ExitCode"] == 0


@pytest.mark.slow
def test_on_a_real_pool_a_lone_input_in_a_directory_travels_as_one_item_and_the_command_finds_it_at_its_path(
        pool, tmp_path):
    (tmp_path / "steps" / "0").mkdir(parents=True)
    (tmp_path / "steps" / "0" / "3.txt").write_text("link 3\n")
    submit, _ = _job(tmp_path, ["steps/0/3.txt"], ["steps/0/4.txt"])
    assert _listed(submit) == [str(tmp_path / "steps" / "0" / "3.txt")]  # one file: no Mkdir items before it
    _run(pool, submit)
    assert (tmp_path / "steps" / "0" / "4.txt").read_text() == "link 3\n"
    assert not (tmp_path / "3.txt").exists()  # moved to its path in the sandbox, so not sent back flat


def test_two_input_files_keep_their_paths(tmp_path):
    """With two or more files the 5-s wait stays whatever their directories: moving them would only cost processes."""
    for name in ("a/x.txt", "b/y.txt"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(name)
    submit, _ = _job(tmp_path, ["a/x.txt", "b/y.txt"], ["out/z.txt"])
    assert _listed(submit) == ["a/x.txt", "b/y.txt"]
    assert "mv " not in submit["arguments"]


def test_the_embedded_pool_keeps_every_path(tmp_path):
    (tmp_path / "steps" / "0").mkdir(parents=True)
    (tmp_path / "steps" / "0" / "3.txt").write_text("x")
    submit, _ = _job(tmp_path, ["steps/0/3.txt"], ["steps/0/4.txt"], real_pool=False)
    assert _listed(submit)[0] == "steps/0/3.txt"


@pytest.mark.parametrize("inputs, outputs", [
    (["data/data"], ["out.txt"]),  # its directory has its name: the directory is made before the move
    (["x/out"], ["out/y.txt"]),  # an output directory of the job has its name
    (["x/.hidden"], ["y.txt"]),  # HTCondor's own files at the sandbox's top start with '.' or _condor_
    (["x/_condor_stdout"], ["y.txt"]),
    (["top.txt"], ["y.txt"]),  # already one item
    (["dir/sub"], ["y.txt"]),  # a directory: its contents are items of their own
])
def test_an_input_whose_base_name_a_place_in_the_sandbox_takes_keeps_its_path(tmp_path, inputs, outputs):
    for name in inputs:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if name == "dir/sub":
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text(name)
    submit, _ = _job(tmp_path, inputs, outputs, command="true")
    assert _listed(submit)[0] == inputs[0]


def test_the_move_is_done_once_so_a_job_restarted_in_its_sandbox_runs_again(tmp_path):
    """A self-checkpointing job restarts in the same sandbox, its input already moved: the move must not fail it."""
    (tmp_path / "steps" / "0").mkdir(parents=True)
    (tmp_path / "steps" / "0" / "3.txt").write_text("link 3\n")
    _, argv = _job(tmp_path, ["steps/0/3.txt"], ["steps/0/4.txt"])
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    (sandbox / "3.txt").write_text("link 3\n")  # where HTCondor put it
    for attempt in (1, 2):
        done = subprocess.run(argv, cwd=sandbox, capture_output=True, text=True)
        assert done.returncode == 0, (attempt, done.stderr)
        assert (sandbox / "steps" / "0" / "4.txt").read_text() == "link 3\n"
