"""Finished jobs' sandboxes are deleted off the daemon's lock.

Deleting a sandbox tree held the daemon's lock for milliseconds per job (about a quarter of
the daemon's time in a 1,000-job sweep). Under the lock a sandbox is only renamed aside (one
system call; the name is free at once for a job that runs again); a background thread
deletes it. What a daemon that stops leaves aside, the next one's start-up wipes with the
rest of the execute directory.
"""
import itertools
import queue
import shutil
import threading
from pathlib import Path


class BackgroundRemoval:
    def __init__(self, aside_dir: Path):
        self.aside_dir = aside_dir
        self._names = itertools.count()
        self._queue: queue.SimpleQueue[Path] = queue.SimpleQueue()
        threading.Thread(target=self._delete_forever, name="sandbox-removal", daemon=True).start()

    def remove(self, directory: Path) -> None:
        self.aside_dir.mkdir(parents=True, exist_ok=True)
        aside = self.aside_dir / str(next(self._names))
        try:
            directory.rename(aside)
        except FileNotFoundError:
            return
        self._queue.put(aside)

    def _delete_forever(self):
        while True:
            shutil.rmtree(self._queue.get(), ignore_errors=True)
