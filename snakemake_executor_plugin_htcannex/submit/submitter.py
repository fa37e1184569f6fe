"""Submits jobs to the schedd on a thread of its own, in the order they come, and asks the schedd
to schedule them at once.

Snakemake calls the executor's run_job on its main thread, which also picks the next jobs
to run: waiting there for each submit's round trip to the schedd (a socket round trip to
the embedded pool, a network one to a real access point, each longer while the schedd is
busy) held every further job back by it. The executor builds and checks a job's submit
description on the main thread (a bad value still fails at once, naming the rule), then
hands the description here; what the schedd answers comes back through the callbacks,
from this thread: the job id, or the error, which fails that job (as a refused
`condor_submit` fails only that submit).

After the jobs handed over together are submitted (Snakemake's run_jobs hands over every job
ready at once: `batch`), one `reschedule()` follows, as condor_submit and DAGMan send one after
their submits: the schedd then starts the new jobs on
the claims it holds (a claim kept idle by `keep_claim_idle`, description.py) and asks the
negotiator for a cycle, instead of leaving them for its next periodic pass (SCHEDD_INTERVAL)
and the negotiator's next cycle (NEGOTIATOR_INTERVAL) (schedd.cpp `reschedule_negotiator`).
"""
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import htcondor2

from snakemake_executor_plugin_htcannex.schedd import UNANSWERED

Submitted = Callable[[Any], None]  # gets what schedd.submit returned
Refused = Callable[[Exception], None]  # gets what it raised
_STOP, _BATCH_BEGINS, _BATCH_ENDS = object(), object(), object()
log = logging.getLogger(__name__)


class Submitter:
    def __init__(self, schedd):
        self._schedd = schedd
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._submit_forever, name="htcannex-submit", daemon=True)
        self._thread.start()

    def submit(self, description: htcondor2.Submit, on_submitted: Submitted, on_refused: Refused) -> None:
        """Queue one submit; the callbacks run on the submitting thread once the schedd answered."""
        if not self._thread.is_alive():
            raise RuntimeError("the submitter was stopped: nothing more can be submitted")
        self._queue.put((description, on_submitted, on_refused))

    @contextlib.contextmanager
    def batch(self):
        """The submits queued inside are followed by one reschedule, once they are all submitted (they are
        submitted as they come)."""
        self._queue.put(_BATCH_BEGINS)
        try:
            yield
        finally:
            self._queue.put(_BATCH_ENDS)

    def stop(self) -> None:
        """Submit what is queued, then stop; returns when every queued job has its answer."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()

    def _submit_forever(self):
        open_batches, unscheduled = 0, False
        while (item := self._queue.get()) is not _STOP:
            if item is _BATCH_BEGINS:
                open_batches += 1
            elif item is _BATCH_ENDS:
                open_batches -= 1
            else:
                unscheduled |= self._submit(item)
            if unscheduled and not open_batches and self._queue.empty():
                self._reschedule()
                unscheduled = False
        if unscheduled:  # stopped inside a batch (Ctrl-C)
            self._reschedule()

    def _submit(self, item) -> bool:
        """Submit one job; whether the schedd queued it."""
        description, on_submitted, on_refused = item
        try:
            try:
                result = self._schedd.submit(description)
            except Exception as error:  # the schedd refused it, or could not be reached
                on_refused(error)
                return False
            on_submitted(result)
        except Exception:  # a callback's own failure must not stop the submits queued after it
            log.exception("handling a submit's answer failed")
        return True

    def _reschedule(self) -> None:
        # Only a shortcut: the schedd schedules the jobs on its own in its next pass anyway.
        try:
            self._schedd.reschedule()
        except UNANSWERED as error:
            log.debug("asking the schedd to reschedule failed (its next pass schedules the jobs): %s", error)
