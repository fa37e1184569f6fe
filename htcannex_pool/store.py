"""The queue on disk: sqlite, one row per job, written by the daemon only.

One row per job keeps every change O(1) (no rewrite of the whole queue), and
sqlite's journal makes each change atomic, so a daemon killed at any moment
restarts with a consistent queue. Ads are stored in their ClassAd text form.
"""
import contextlib
import json
import sqlite3
from pathlib import Path

import classad2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (cluster INTEGER, proc INTEGER, ad TEXT, PRIMARY KEY (cluster, proc));
CREATE TABLE IF NOT EXISTS history (cluster INTEGER, proc INTEGER, ad TEXT, PRIMARY KEY (cluster, proc));
CREATE TABLE IF NOT EXISTS annexes (name TEXT PRIMARY KEY, spec TEXT);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
"""


def _key(ad: classad2.ClassAd) -> tuple[int, int]:
    return ad["ClusterId"], ad["ProcId"]


class QueueStore:
    def __init__(self, path: Path):
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a commit survives the daemon being killed (not a power cut),
        # without an fsync per job change.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def jobs(self) -> list[classad2.ClassAd]:
        rows = self._db.execute("SELECT ad FROM jobs ORDER BY cluster, proc")
        return [classad2.parseOne(text) for (text,) in rows]

    def history(self):
        """Finished jobs, newest first, parsed one at a time (callers may stop early)."""
        rows = self._db.execute("SELECT ad FROM history ORDER BY cluster DESC, proc DESC").fetchall()
        return (classad2.parseOne(text) for (text,) in rows)

    @contextlib.contextmanager
    def transaction(self):
        """All changes inside are one commit (nested uses join the outer one)."""
        if self._db.in_transaction:
            yield
            return
        self._db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._db.rollback()
            raise
        self._db.commit()

    def save(self, *ads: classad2.ClassAd):
        with self.transaction():
            self._db.executemany("INSERT OR REPLACE INTO jobs VALUES (?, ?, ?)",
                                 [(*_key(ad), repr(ad)) for ad in ads])

    def retire(self, ad: classad2.ClassAd):
        """Move a finished (completed or removed) job from the queue to the history."""
        with self.transaction():
            self._db.execute("DELETE FROM jobs WHERE cluster = ? AND proc = ?", _key(ad))
            self._db.execute("INSERT OR REPLACE INTO history VALUES (?, ?, ?)", (*_key(ad), repr(ad)))

    def next_cluster_id(self) -> int:
        with self.transaction():
            row = self._db.execute("SELECT value FROM meta WHERE key = 'next_cluster'").fetchone()
            cluster = int(row[0]) if row else 1
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('next_cluster', ?)", (str(cluster + 1),))
        return cluster

    def annexes(self) -> list[dict]:
        return [json.loads(spec) for (spec,) in self._db.execute("SELECT spec FROM annexes ORDER BY name")]

    def save_annex(self, spec: dict):
        self._db.execute("INSERT OR REPLACE INTO annexes VALUES (?, ?)", (spec["name"], json.dumps(spec)))

    def delete_annex(self, name: str):
        self._db.execute("DELETE FROM annexes WHERE name = ?", (name,))

    def close(self):
        self._db.close()
