"""A sweep through the snakemake CLI on every backend (conftest.py): the jobs Snakemake hands over at once are
queued as procs of shared clusters (submit/shared_cluster.py), fewer submits than jobs, and each job still
runs its own command, quotes, spaces and `$` intact; a job the schedd refuses fails alone."""

import pytest

pytestmark = pytest.mark.slow
# Each job's own value travels in its arguments (Snakemake's --target-jobs), as an item of a shared submit;
# the note, the same for all, in the shared part.
NAMES = ["0 $HOME", "1 it's", "2 $(x) $$(y)", "3 a  b", "4 $", "5 cost $5"]
NOTE = 'say "hi" $HOME $(x)'
SNAKEFILE = """\
NAMES = {names!r}

rule all:
    input: expand("out/{{name}}.txt", name=NAMES)

rule sweep:
    output: "out/{{name}}.txt"
    params: note={note!r}
    resources: htcannex_submit=lambda w: {submit}
    shell: "printf '%s|%s\\\\n' {{wildcards.name:q}} {{params.note:q}} > {{output:q}}"
"""


def _run(backend, submit: str):
    work = backend.submit_dir()
    (work / "Snakefile").write_text(SNAKEFILE.format(names=NAMES, note=NOTE, submit=submit))
    done = backend.snakemake(work, "--jobs", str(len(NAMES)), "--retries", "0", "--keep-going",
                             timeout_s=180 + 2 * len(NAMES) * backend.patience_s)
    return work, done


def test_a_sweep_is_queued_in_fewer_clusters_than_jobs_each_job_with_its_own_arguments(backend):
    work, done = _run(backend, "'{}'")
    assert done.returncode == 0, done.stderr[-3000:]
    for name in NAMES:
        assert (work / "out" / f"{name}.txt").read_text() == f"{name}|{NOTE}\n"
    ads = backend.schedd.history(f'HtcannexRule == "sweep" && Iwd == "{work}"', ["ClusterId", "ProcId"], -1)
    jobs = {(ad["ClusterId"], ad["ProcId"]) for ad in ads}
    assert len(jobs) == len(NAMES)
    assert len({cluster for cluster, _ in jobs}) < len(NAMES), sorted(jobs)


def test_a_job_the_schedd_refuses_fails_alone_the_others_of_its_submit_run(backend):
    # The same keys for every job, so that they share a submit; job 3's notification only the schedd refuses.
    work, done = _run(backend, """'{"notification": "%s"}' % ("sometimes" if w.name.startswith("3") else "never")""")
    assert done.returncode != 0
    assert "The schedd refused to queue job" in done.stderr and "otification" in done.stderr, done.stderr[-3000:]
    for name in NAMES:
        out = work / "out" / f"{name}.txt"
        assert out.read_text() == f"{name}|{NOTE}\n" if not name.startswith("3") else not out.exists()
