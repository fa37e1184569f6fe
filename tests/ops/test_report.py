"""`htcannex report` of a Snakemake run through htcannex: the job ads add rule, run, chunk,
site and attempt to the event log's figures; a memory hold turns into advice."""
import json
import subprocess

import pytest

from .snakemake_runs import HTCANNEX, run_snakemake


@pytest.mark.slow
def test_report_of_a_run_names_chunks_sites_and_advises_after_a_memory_hold(workdir, user_env, embedded_pool,
                                                                            tmp_path):
    result = run_snakemake(workdir, user_env, "run0-chunk0.txt", "run0-chunk1.txt", "hog.txt",
                           extra=["--config", "sleep=2"])
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "report.json"
    report = subprocess.run([str(HTCANNEX), "report", "--directory", str(workdir), "--json", str(out),
                             "--pool-dir", str(embedded_pool.spool_dir), "--htcannex-config",
                             str(workdir / "htcannex.yaml"), "--epochs-per-job", "4", "--html",
                             str(tmp_path / "report.html")],
                            capture_output=True, text=True, timeout=120, env=user_env)
    assert report.returncode == 0, report.stderr
    document = json.loads(out.read_text())
    chunks = {(job["rule"], job["run"], job["chunk"]): job for job in document["jobs"] if job["rule"] == "chunk"}
    assert sorted(chunks) == [("chunk", "0", "0"), ("chunk", "0", "1")]
    assert [chunks[key]["site"] for key in sorted(chunks)] == ["a", "b"]  # round-robin over a, b, c
    assert all(job["state"] == "done" and job["compute_s"] >= 2 for job in chunks.values())
    sites = {site["site"]: site for site in document["sites"]}
    assert sites["a"]["epoch_median_s"] == pytest.approx(chunks[("chunk", "0", "0")]["compute_s"] / 4)
    assert document["core_hour_budget"] == 100

    hogs = sorted((job for job in document["jobs"] if job["rule"] == "hog"), key=lambda job: job["attempt"])
    assert [job["attempt"] for job in hogs] == [1, 2]
    assert hogs[0]["memory_holds"] == 1 and hogs[1]["state"] == "done"
    assert hogs[1]["memory_peak_mb"] >= 800  # the job holds an 800 MB block
    memory, = [item for item in document["advice"] if (item["group"], item["resource"]) == ("hog", "memory")]
    # from the peak of the attempt that finished, not from its generous retry request (1500 MB)
    assert memory["flag"] == "held for exceeding"
    assert memory["suggested"] == 64 * -(-hogs[1]["memory_peak_mb"] * 1.2 // 64)
    assert "hog: memory peak" in report.stdout and "suggest request_memory" in report.stdout
    hog, = [chunk for chunk in document["chunks"] if chunk["chunk_key"] == "hog"]
    assert (hog["attempts"], hog["state"]) == (2, "done")
    assert hog["lost_attempts_s"] == pytest.approx(hogs[0]["compute_s"])
    assert "per chunk (its attempts added up)" in report.stdout


@pytest.mark.slow
def test_report_flags_a_job_killed_out_of_memory_on_an_annex(workdir, user_env, embedded_pool, tmp_path):
    # On an annex no cgroup holds the job and its snapshots may miss the peak: the kill itself is the evidence.
    result = run_snakemake(workdir, user_env, "oom-run0-chunk0.txt")
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "report.json"
    report = subprocess.run([str(HTCANNEX), "report", "--directory", str(workdir), "--json", str(out),
                             "--pool-dir", str(embedded_pool.spool_dir), "--htcannex-config",
                             str(workdir / "htcannex.yaml")],
                            capture_output=True, text=True, timeout=120, env=user_env)
    assert report.returncode == 0, report.stderr
    document = json.loads(out.read_text())
    attempts = sorted((job for job in document["jobs"] if job["rule"] == "oom"), key=lambda job: job["attempt"])
    assert [(job["site"], job["killed"], job["state"]) for job in attempts] == [("small", True, "failed"),
                                                                                   ("a", False, "done")]
    memory, = [item for item in document["advice"] if (item["group"], item["resource"]) == ("oom", "memory")]
    assert memory["flag"] == "killed without a hold"
    assert "1 job(s) killed by SIGKILL without a hold" in report.stdout
    assert "1 killed by SIGKILL" in report.stdout and "SIGKILL, not held" in report.stdout
