"""`htcannex annex list`: the annexes a working directory requested, beside what of them is up now."""
import os
import subprocess
import sys
from pathlib import Path

import yaml

HTCANNEX = Path(sys.executable).parent / "htcannex"


def test_annex_list_shows_each_request_of_this_directory_and_whether_it_is_up(tmp_path, embedded_pool):
    (tmp_path / "htcannex.yaml").write_text(yaml.safe_dump({
        "pool": "local", "annex": {"mode": "auto", "max_annexes": 2, "core_hour_budget": 10, "idle_timeout": "5m"},
        "sites": {"a": {"kind": "annex", "facts": "catalogue", "cpus": 1, "memory": "1GB", "max_lifetime": "1h",
                        "lifetime": "30m"}}}))
    options = ["--htcannex-config", "htcannex.yaml", "--pool-dir", str(embedded_pool.spool_dir)]

    def htcannex(*args):
        done = subprocess.run([str(HTCANNEX), "annex", *args, *options], cwd=tmp_path, capture_output=True, text=True,
                              env=dict(os.environ), timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    htcannex("create", "a")
    header, row, spent = htcannex("list")
    assert header.split()[:2] == ["ANNEX", "SITE"]
    assert row.split()[:2] == ["htcannex-a", "a"] and row.split()[4:] == ["0.5", "live", "up:", "1", "node(s),", "0",
                                                                           "job(s)"]
    assert spent == "0.5 of core_hour_budget 10 core-hours spent from this directory"
    embedded_pool.remove_annex("htcannex-a")
    assert htcannex("list")[1].split()[5:] == ["live", "not", "up"]
