"""`htcannex report` on event logs in HTCondor's own text format (see logs/README.md for
where each fixture's format comes from), and its answers to bad input."""
import json
from pathlib import Path

import pytest

from snakemake_executor_plugin_htcannex.cli import main

LOGS = Path(__file__).parent / "logs"


def report_json(tmp_path, log: Path, *options) -> dict:
    out = tmp_path / "report.json"
    assert main(["report", str(log), "--json", str(out), *options]) == 0
    return json.loads(out.read_text())


def test_manual_example_resources_table(tmp_path):
    job, = report_json(tmp_path, LOGS / "quickstart.log")["jobs"]
    assert (job["cpus_requested"], job["cpus_allocated"], job["cpus_used"]) == (1, 1, None)
    assert (job["disk_used_kb"], job["disk_requested_kb"], job["disk_allocated_kb"]) == (100000, 100000, 2033496)
    assert (job["memory_peak_mb"], job["memory_requested_mb"], job["memory_allocated_mb"]) == (0, 98, 2001)
    assert (job["bytes_in"], job["bytes_out"]) == (113, 23)
    assert (job["state"], job["queue_wait_s"], job["compute_s"], job["wall_s"]) == ("done", 20, 7, 7)


def test_lifecycle_figures_match_the_arranged_times(tmp_path, capsys):
    document = report_json(tmp_path, LOGS / "lifecycle.log")
    job, = document["jobs"]
    # submitted on hold 0-30 s, idle 30-40, 145-160, 260-270; memory hold 200-260
    assert (job["annex_wait_s"], job["queue_wait_s"], job["held_s"]) == (30, 35, 60)
    assert (job["holds"], job["hold_codes"], job["memory_holds"]) == (1, "34/102", 1)
    assert (job["runs"], job["evictions"], job["checkpoints"]) == (3, 1, 1)
    assert (job["transfer_in_s"], job["transfer_out_s"]) == (5 + 2 + 3, 2 + 4)
    # on slots 40-145, 160-200, 270-404, less transfers; lost: 45-145 (evicted), 162-200 (held)
    assert (job["compute_s"], job["badput_s"], job["wall_s"]) == (100 + 38 + 125, 100 + 38, 364)
    assert job["cpu_s"] == 190 + 20
    assert job["cpu_efficiency"] == pytest.approx(210 / 263)
    assert (job["cpus_used"], job["memory_peak_mb"], job["memory_requested_mb"]) == (0.95, 1010, 1024)
    assert job["site"] == "htcannex-delta" and job["slot"] == "slot1_1@delta-gpu-3"
    assert job["core_hours"] == pytest.approx((105 + 40 + 134) / 3600)
    memory, = [item for item in document["advice"] if item["resource"] == "memory"]
    assert memory["flag"] == "held for exceeding"
    assert memory["suggested"] == 1280  # the request (the peak was cut short) + 20 %, in 64 MB steps
    summary = capsys.readouterr().out
    assert "suggest request_memory = 1280MB (Snakemake: mem_mb=1280)" in summary


@pytest.mark.parametrize("log, checkpoints", [
    ("checkpoint_in_place_25.14.log", 1),  # exit 85, restarted in its sandbox, then exit 0
    ("missing_output_25.14.log", 0),  # output transfer, then evicted and held with code 12
])
def test_an_output_transfer_counts_as_a_checkpoint_only_where_the_job_went_on(tmp_path, log, checkpoints):
    job, = report_json(tmp_path, LOGS / log)["jobs"]
    assert (job["runs"], job["checkpoints"]) == (1, checkpoints)


def test_dagman_nodes_log_groups_by_node_and_flags_low_memory(tmp_path):
    document = report_json(tmp_path, LOGS / "dagman_nodes.log", "--threshold", "0.5", "--headroom", "0.25")
    assert [job["dag_node"] for job in document["jobs"]] == ["train_run1_chunk0", "train_run1_chunk1", "eval_run1"]
    assert [job["job"] for job in document["jobs"]] == ["20.0", "21.0", "22.0"]
    assert [job["compute_s"] for job in document["jobs"]] == [100, 120, 50]
    flagged = {(item["group"], item["resource"]): item for item in document["advice"] if item["flag"]}
    assert flagged[("train", "memory")]["suggested"] == 512  # 400 MB x 1.25, in 64 MB steps
    assert ("eval", "memory") not in flagged  # 900 of 1000 MB
    assert document["jobs"][2]["cpus_used"] == pytest.approx(1.8)  # 90 cpu-seconds over 50 s


def test_a_peak_the_schedd_shows_above_the_request_is_flagged_and_the_suggestion_covers_it(tmp_path):
    # A 49 MB peak under a 64 MB request: the schedd stores the 50,176 KiB resident size as 75,000 and shows
    # MemoryUsage 74 MB, over the request for a SYSTEM_PERIODIC_HOLD on MemoryUsage > RequestMemory.
    log = (LOGS / "quickstart.log").read_text()
    log = log.replace("\t0  -  MemoryUsage of job (MB)\n\t0  -  ResidentSetSize of job (KB)",
                      "\t49  -  MemoryUsage of job (MB)\n\t50176  -  ResidentSetSize of job (KB)")
    log = log.replace("Memory (MB)          :        0       98      2001",
                      "Memory (MB)          :       49       64      2001")
    (tmp_path / "job.log").write_text(log)
    memory, = [item for item in report_json(tmp_path, tmp_path / "job.log")["advice"] if item["resource"] == "memory"]
    assert (memory["peak"], memory["requested"], memory["flag"]) == (49, 64, "over request")
    assert memory["suggested"] == 128  # 74 MB in 64 MB steps; the peak + 20 % alone would say 64
    assert "the schedd shows this peak as MemoryUsage 74 MB" in memory["text"]
    # The same for disk: 500 MB used reads DiskUsage 732 MB (750,000 KiB) under a 640-MB request.
    log = log.replace("Disk (KB)            :   100000   100000   2033496",
                      "Disk (KB)            :   512000   655360   2033496")
    (tmp_path / "job.log").write_text(log)
    disk, = [item for item in report_json(tmp_path, tmp_path / "job.log")["advice"] if item["resource"] == "disk"]
    assert (disk["peak"], disk["requested"], disk["flag"], disk["suggested"]) == (500, 640, "over request", 768)
    assert "the schedd shows this peak as DiskUsage 732 MB" in disk["text"]


def _memory_advice(document: dict) -> dict:
    memory, = [item for item in document["advice"] if item["resource"] == "memory"]
    return memory


def test_a_memory_peak_from_a_run_shorter_than_the_snapshots_suggests_no_smaller_request(tmp_path, capsys):
    # A real 25.14.0 pool without per-job cgroups: the job that held 100 MB for 3 s reads 5.8 MB (its start).
    document = report_json(tmp_path, LOGS / "memory_snapshots_25.14.log")
    assert [round(job["memory_peak_mb"]) for job in document["jobs"]] == [6, 109, 109, 109]
    assert [job["longest_run_s"] for job in document["jobs"]] == [5, 14, 22, 43]
    memory = _memory_advice(document)
    assert (memory["flag"], memory["suggested"], memory["requested"]) == ("unmeasured", None, 512)
    assert "2 of 4 job(s) ran less than 15 s" in memory["text"]
    assert "no smaller request_memory is suggested" in capsys.readouterr().out
    # The manual's own example: 0 MB for a 7-s job.
    assert _memory_advice(report_json(tmp_path, LOGS / "quickstart.log"))["flag"] == "unmeasured"


def test_the_same_peaks_from_runs_longer_than_the_snapshots_suggest_less(tmp_path):
    log = (LOGS / "memory_snapshots_25.14.log").read_text()
    # Only the 20-s and 40-s jobs (161.2, 161.3): each ran through at least one snapshot after its start.
    kept = "".join(event for event in log.split("...\n") if event and event.split()[1][:9] in ("(161.002.", "(161.003."))
    assert kept.count("Job terminated.") == 2
    (tmp_path / "long.log").write_text(kept.replace("\n0", "\n...\n0") + "...\n")
    memory = _memory_advice(report_json(tmp_path, tmp_path / "long.log"))
    assert (memory["flag"], memory["requested"]) == ("low use", 512)
    # 109 MB + 20 % = 131, which the schedd's 123-MB MemoryUsage is under: 192 in 64-MB steps.
    assert memory["suggested"] == 192


def test_jobs_killed_by_sigkill_without_a_hold_make_their_request_a_floor(tmp_path, capsys):
    # A real 25.14.0 pool without per-job cgroups: a command killed in the job's shell (return value 137) and a
    # job killed itself (signal 9), each after holding 200 MB for 1 s, which the snapshots missed (6 MB).
    document = report_json(tmp_path, LOGS / "killed_25.14.log")
    assert [(job["killed"], round(job["memory_peak_mb"]), job["state"]) for job in document["jobs"]] == [
        (True, 6, "failed"), (True, 6, "failed")]
    memory = _memory_advice(document)
    # the 300-MB request + 20 % in 64-MB steps, not the 6-MB peak's "low use"
    assert (memory["flag"], memory["requested"], memory["suggested"]) == ("killed without a hold", 300, 384)
    out = capsys.readouterr().out
    assert "2 job(s) killed by SIGKILL without a hold" in out and "2 killed by SIGKILL" in out


def test_tsv_and_html_outputs(tmp_path):
    tsv, page, figures = tmp_path / "jobs.tsv", tmp_path / "report.html", tmp_path / "figures"
    assert main(["report", str(LOGS / "dagman_nodes.log"), "--tsv", str(tsv), "--html", str(page),
                 "--figures", str(figures)]) == 0
    header, *rows = [line.split("\t") for line in tsv.read_text().splitlines()]
    assert len(rows) == 3 and rows[1][header.index("dag_node")] == "train_run1_chunk1"
    assert page.read_text().count("data:image/png;base64,") == 3
    assert sorted(path.name for path in figures.iterdir()) == ["requests.png", "sites.png", "timeline.png"]


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp / "absent.log", "does not exist"),
    (lambda tmp: tmp, "is not a file"),
    (lambda tmp: _write(tmp / "empty.log", ""), "is empty"),
    (lambda tmp: _write(tmp / "notes.txt", "hello\n"), "holds no HTCondor job events"),
])
def test_bad_logs_are_named_without_a_traceback(tmp_path, capsys, make, message):
    path = make(tmp_path)
    assert main(["report", str(path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"htcannex report: {path}") and message in error
    assert "Traceback" not in error


def test_default_log_is_the_run_directorys(tmp_path, capsys):
    assert main(["report", "--directory", str(tmp_path)]) == 2
    assert f"{tmp_path}/.htcannex/jobs.log does not exist" in capsys.readouterr().err


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_threshold_outside_zero_to_one_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["report", str(LOGS / "quickstart.log"), "--threshold", "80"])
    assert exit_.value.code == 2
    assert "argument --threshold: invalid fraction value: '80'" in capsys.readouterr().err
