"""Waiting for the next write to the user event log: a chain of short jobs waits on each job's end.

Where Linux's inotify can watch the log, a write to it ends the wait at once, and the status thread
looks whether the log grew without a write only seldom (executor.py). Elsewhere (another system) the
wait ends at its timeout, and the status thread looks often; a log written on another machine onto a
network filesystem, which inotify does not see, is found by those looks. The log itself stays the
only source of what happened: a wake-up only makes the status thread look sooner.
"""
import asyncio
import os
from pathlib import Path


class LogWrites:
    def __init__(self, path: Path):
        self.path = path
        self._inotify = None
        # False once inotify is known to be of no use here; the waits are plain timeouts then.
        self._watchable = True
        self._woken: asyncio.Future | None = None

    @property
    def watching(self) -> bool:
        """Whether a write ends a wait: else only its timeout does."""
        return self._inotify is not None

    async def wait(self, timeout_s: float) -> None:
        """Return after the log's next write, at the latest after `timeout_s`. As cheap as
        asyncio.sleep (a future and a timer; asyncio.wait_for's task tripled a wait's CPU); the
        inotify descriptor is read only during the wait, so writes cost nothing between waits."""
        if self._inotify is None and self._watchable and self.path.exists():
            self._watch()
        loop = asyncio.get_running_loop()
        self._woken = loop.create_future()
        timer = loop.call_later(timeout_s, self._wake)
        if self._inotify is not None:
            loop.add_reader(self._inotify.fd, self._written)
        try:
            await self._woken
        finally:
            timer.cancel()
            if self._inotify is not None:
                loop.remove_reader(self._inotify.fd)

    def _wake(self) -> None:
        if not self._woken.done():
            self._woken.set_result(None)

    def _written(self) -> None:
        """The log was written: drain what inotify queued (the log, not the events, says what
        happened) and end the wait."""
        try:
            while os.read(self._inotify.fd, 4096):
                pass
        except BlockingIOError:
            pass
        self._wake()

    def _watch(self) -> None:
        """Watch the log (it exists) with inotify, where there is one."""
        try:
            from asyncinotify import Inotify, Mask  # Linux only; imported when a run first waits
        except (ImportError, OSError, AttributeError):
            self._watchable = False
            return
        inotify = None
        try:
            inotify = Inotify()
            inotify.add_watch(self.path, Mask.MODIFY)
        except OSError:  # out of inotify instances or watches, or a filesystem without them
            if inotify is not None:
                inotify.close()
            self._watchable = False
            return
        os.set_blocking(inotify.fd, False)  # drained until empty; asyncinotify 4.4.4's InitFlags.NONBLOCK has O_CLOEXEC's value
        self._inotify = inotify

    def close(self) -> None:
        """After the status thread's loop has ended."""
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None
