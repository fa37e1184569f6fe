"""Finished jobs' outputs are sent back off the daemon's lock.

Copying a job's outputs (and its stdout and stderr) back to the submit side held the daemon's
lock for every job that ended, while submits and status requests waited. Here, as with
HTCondor's shadow, the job stays Running on its claimed slot while its outputs go back: the
scheduler logs "Started transferring output files" and hands the job here; a background thread
copies (transfer.stage_out) and queues the outcome; the scheduler's next cycle, under the lock,
takes it and ends the job. A job removed, held or evicted meanwhile has left the scheduler's
running jobs, and its outcome is dropped.
"""
import logging
import queue
import threading
from collections.abc import Callable
from pathlib import Path

import classad2
from htcondor_codes import HoldCode

from . import starter, transfer

log = logging.getLogger("htcannex.pool")
# What a transfer came to: the bytes sent, or why it failed.
Outcome = int | transfer.TransferError


class OutputTransfers:
    def __init__(self, origin: Path, on_done: Callable[[], None]):
        """`on_done` is called (from the transfer thread) after each transfer, to wake the scheduler."""
        self.origin, self.on_done = origin, on_done
        self._to_send: queue.SimpleQueue = queue.SimpleQueue()
        self._sent: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._send_forever, name="output-transfer", daemon=True).start()

    def send(self, job: classad2.ClassAd, running: starter.RunningJob, succeeded: bool) -> None:
        self._to_send.put((job, running, succeeded))

    def finished(self) -> list[tuple[starter.RunningJob, Outcome]]:
        """The transfers done since the last call, in the order they finished."""
        done = []
        while not self._sent.empty():
            done.append(self._sent.get())
        return done

    def _send_forever(self):
        while True:
            job, running, succeeded = self._to_send.get()
            try:
                outcome = transfer.stage_out(job, running.sandbox, self.origin, running.inputs_before, succeeded)
            except transfer.TransferError as error:
                outcome = error
            except Exception as error:  # never let one job's transfer stop everyone's
                log.exception("output transfer of job %s.%s failed", *running.key)
                outcome = transfer.TransferError(HoldCode.TransferOutputError, 0,
                                                 f"Transfer output files failure at execution point: {error}")
            self._sent.put((running, outcome))
            self.on_done()
