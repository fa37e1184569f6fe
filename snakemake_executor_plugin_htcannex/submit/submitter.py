"""Submits jobs to the schedd on a thread of its own, in the order they come.

Snakemake calls the executor's run_job on its main thread, which also picks the next jobs
to run: waiting there for each submit's round trip to the schedd (a socket round trip to
the embedded pool, a network one to a real access point, each longer while the schedd is
busy) held every further job back by it. The executor builds and checks a job's submit
description on the main thread (a bad value still fails at once, naming the rule), then
hands the description here; what the schedd answers comes back through the callbacks,
from this thread: the job id, or the error, which fails that job (as a refused
`condor_submit` fails only that submit).

The jobs Snakemake hands over at once (run_jobs, a sweep's tens of jobs) go out together once
the last of them is described (`handing_over`), and with them whatever else is queued: those that
can share a cluster as one submit (submit/shared_cluster.py), one schedd transaction for all of
them. Nothing else is waited for: a chain's one job goes out as soon as it is described. Taking
jobs as they came instead gave submits of 2 jobs on average: htcondor2's Schedd.submit holds the
GIL for its whole round trip, so the main thread describes little while a submit is under way.
A shared submit the schedd refuses queues nothing; its jobs are then submitted one by one, so
that only a job the schedd refuses fails, with the schedd's own message.
"""
import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import htcondor2

from snakemake_executor_plugin_htcannex.submit import shared_cluster

Submitted = Callable[[Any], None]  # gets what schedd.submit returned
Refused = Callable[[Exception], None]  # gets what it raised
_STOP = object()
log = logging.getLogger(__name__)


class Submitter:
    def __init__(self, schedd):
        self._schedd = schedd
        self._queue: queue.Queue = queue.Queue()
        self._handover = threading.Lock()  # held while Snakemake hands jobs over
        self._thread = threading.Thread(target=self._submit_forever, name="htcannex-submit", daemon=True)
        self._thread.start()

    def submit(self, description: htcondor2.Submit, on_submitted: Submitted, on_refused: Refused) -> None:
        """Queue one submit; the callbacks run on the submitting thread once the schedd answered."""
        if not self._thread.is_alive():
            raise RuntimeError("the submitter was stopped: nothing more can be submitted")
        self._queue.put((description, on_submitted, on_refused))

    @contextlib.contextmanager
    def handing_over(self) -> Iterator[None]:
        """The jobs submitted inside go out together when it ends (none of them before)."""
        with self._handover:
            yield

    def stop(self) -> None:
        """Submit what is queued, then stop; returns when every queued job has its answer."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join()

    def _submit_forever(self):
        stopped = False
        while not stopped:
            taken = [self._queue.get()]
            with self._handover:
                while taken[-1] is not _STOP and not self._queue.empty():
                    taken.append(self._queue.get())
            if stopped := taken[-1] is _STOP:
                taken.pop()
            for group in shared_cluster.groups([description for description, _, _ in taken]):
                self._submit([taken[index] for index in group])

    def _submit(self, jobs: list):
        if len(jobs) > 1:
            try:
                template, items = shared_cluster.shared([description for description, _, _ in jobs])
                result = self._schedd.submit(template, itemdata=iter(items))
            except Exception as error:  # nothing was queued: find the job the schedd refuses
                log.info("a shared submit of %d jobs was refused (%s); submitting them one by one", len(jobs), error)
            else:
                for proc, (_, on_submitted, _) in enumerate(jobs, start=result.first_proc()):
                    _answer(on_submitted, shared_cluster.ProcOfCluster(result.cluster(), proc))
                return
        for description, on_submitted, on_refused in jobs:
            try:
                result = self._schedd.submit(description)
            except Exception as error:  # the schedd refused it, or could not be reached
                _answer(on_refused, error)
            else:
                _answer(on_submitted, result)


def _answer(callback, result) -> None:
    try:
        callback(result)
    except Exception:  # a callback's own failure must not stop the submits queued after it
        log.exception("handling a submit's answer failed")
