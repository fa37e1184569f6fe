"""`htcannex status`: the board of runs x chunks read from the event log and the job ads."""
import json
import signal
import subprocess
import time

import pytest

from .snakemake_runs import HTCANNEX, board, run_snakemake, snakemake_argv, status

CLEAR_SCREEN = "\x1b[H\x1b[2J"


def rows_once_started(workdir, pool):
    """The board's rows, or [] before the executor has set up .htcannex/."""
    return board(workdir, pool)["rows"] if (workdir / ".htcannex").is_dir() else []


@pytest.mark.slow
def test_board_follows_chunks_from_running_to_done_with_site_epoch_times(workdir, user_env, embedded_pool):
    targets = ["run0-chunk0.txt", "run0-chunk1.txt"]
    snakemake = subprocess.Popen(snakemake_argv(workdir, *targets, extra=["--config", "sleep=3"]), cwd=workdir,
                                 env=user_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while not any(row["state"] == "running" for row in rows_once_started(workdir, embedded_pool)):
            assert time.time() < deadline, "no chunk ever showed as running"
            time.sleep(0.3)
        running = board(workdir, embedded_pool)
        _, stderr = snakemake.communicate(timeout=120)
    finally:
        snakemake.kill()
    assert snakemake.returncode == 0, stderr[-3000:]

    final = board(workdir, embedded_pool)
    rows = [(row["rule"], row["run"], row["chunk"], row["site"], row["annex"], row["state"], row["epochs"])
            for row in final["rows"]]
    assert rows == [("chunk", "0", 0, "a", "htcannex-a", "done", "1-4"),
                    ("chunk", "0", 1, "b", "htcannex-b", "done", "5-8")]
    assert all(row["seconds"] >= 3 for row in final["rows"])  # the chunk sleeps 3 s
    profile = {site["site"]: site for site in final["sites"]}
    assert set(profile) == {"a", "b"}
    assert profile["a"]["mean_epoch_s"] == pytest.approx(profile["a"]["mean_chunk_s"] / 4)
    assert "epochs_per_job=4" in final["epoch_time_source"]
    annexes = {annex["annex"]: annex for annex in running["annexes"]}  # created on demand
    assert annexes["htcannex-a"]["slots"] == 1
    assert 0 < annexes["htcannex-a"]["seconds_left"] <= 30 * 60
    assert final["annexes"] == []  # the run ended the annexes it requested

    text = status(workdir, embedded_pool, "--once").stdout
    assert text.splitlines()[0].split() == ["RULE", "RUN", "CHUNK", "EPOCHS", "SITE", "STATE", "TIME", "JOB", "CHECK", "NOTE"]
    assert "chunk wall time only: epochs_per_job unknown" in text  # no config/config.yaml here

    # Without --once it refreshes until Ctrl-C.
    # As from a terminal: a CI runner started in the background hands its children SIGINT
    # ignored, and Python installs no KeyboardInterrupt handler for an ignored SIGINT.
    live = subprocess.Popen([str(HTCANNEX), "status", "--directory", str(workdir), "--pool-dir",
                             str(embedded_pool.spool_dir), "--interval", "0.2"], stdout=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    first = live.stdout.read(len(CLEAR_SCREEN))  # the first frame is on the screen
    time.sleep(1)
    live.send_signal(signal.SIGINT)
    out, _ = live.communicate(timeout=20)
    assert live.returncode == 0
    assert (first + out).count(CLEAR_SCREEN) >= 2


def test_status_outside_a_run_directory_says_where_to_run_it(tmp_path, embedded_pool):
    result = subprocess.run([str(HTCANNEX), "status", "--directory", str(tmp_path), "--once"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "has no .htcannex directory" in result.stderr and "--directory" in result.stderr


@pytest.mark.slow
def test_board_counts_epochs_from_the_first_chunk_and_submissions_of_the_latest_run_only(
        workdir, user_env, embedded_pool):
    # Chunks numbered from 1, as protein_lm does; a second Snakemake run in the same directory
    # (one event log) redoes chunk 1, as a second `make demo` does.
    first = run_snakemake(workdir, user_env, "run0-chunk1.txt", "run0-chunk2.txt")
    assert first.returncode == 0, first.stderr[-3000:]
    (workdir / "run0-chunk1.txt").unlink()
    second = run_snakemake(workdir, user_env, "run0-chunk1.txt")
    assert second.returncode == 0, second.stderr[-3000:]

    final = board(workdir, embedded_pool)
    assert [(row["chunk"], row["epochs"], row["jobs"]) for row in final["rows"]] == [(1, "1-4", 1), (2, "5-8", 1)]
    assert final["first_chunks"] == {"chunk": 1}
    text = status(workdir, embedded_pool, "--once", "--epochs-per-job", "4").stdout
    assert "EPOCHS count from each rule's first chunk: chunk 1" in text
    assert "submissions" not in text  # the second run submitted chunk 1 once: no resubmission to note

    # A workflow whose chunks start elsewhere says so.
    numbered_from_0 = status(workdir, embedded_pool, "--json", "--epochs-per-job", "4", "--first-chunk", "0")
    assert [row["epochs"] for row in json.loads(numbered_from_0.stdout)["rows"]] == ["5-8", "9-12"]
