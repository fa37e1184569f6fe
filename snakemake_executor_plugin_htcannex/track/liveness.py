"""Noticing a schedd (or the embedded pool's daemon) that stops answering while jobs are active.

Job status comes from the event log alone (event_log.py). A schedd that dies or hangs leaves that
log silent, and the run would wait without a word. So while jobs are active and neither the log
nor the schedd has said anything for a while, the executor asks the schedd one small query; a
call that fails (an error, or no answer in time) is said once, with what to do, and its coming
back is said too. Any other schedd call of a status check that fails is reported the same way.
"""
import time
from typing import Optional

from snakemake_executor_plugin_htcannex.schedd import UNANSWERED

# Status intervals (--seconds-between-status-checks) of silence before the schedd is asked:
# 5 s with the local profile's 1 s, 150 s with the nairr profile's 30 s.
SILENT_CHECKS = 5
# A real schedd is asked after no less silence than this: a job's transfer, start and end and a chain's hops
# leave shorter gaps in the log (a starter told to retry its request waits 5 s), and a query per gap would be
# a query per job, which the schedd serves for every user of the access point. The embedded pool's daemon is
# this machine's, asked over a local socket.
REAL_SCHEDD_SILENCE_S = 60.0


def silence_s(status_interval_s: float, embedded: bool) -> float:
    """How long the log and the schedd may say nothing before the schedd is asked."""
    checks = SILENT_CHECKS * status_interval_s
    return checks if embedded else max(checks, REAL_SCHEDD_SILENCE_S)


class ScheddWatch:
    def __init__(self, schedd, silence_s: float, embedded: bool, logger):
        """`embedded`: the schedd is the embedded pool's."""
        self._schedd, self.silence_s, self._embedded, self._logger = schedd, silence_s, embedded, logger
        self._last_sign = time.monotonic()  # the last event-log news or schedd answer
        self._down_since: Optional[float] = None

    def heard(self) -> None:
        """The event log grew: the schedd is at work."""
        self._last_sign = time.monotonic()

    def probe(self) -> bool:
        """Ask the schedd a query that selects nothing when it has been silent too long (every
        status check while it does not answer); False while it does not answer."""
        now = time.monotonic()
        if self._down_since is None and now - self._last_sign < self.silence_s:
            return True
        self._last_sign = now
        try:
            self._schedd.query("false", projection=["ClusterId"])
        except UNANSWERED as error:
            self.unanswered(error)
            return False
        self._answered()
        return True

    def unanswered(self, error: Exception) -> None:
        """A schedd call failed: said once per outage; the next status checks ask again."""
        if self._down_since is not None:
            return
        self._down_since = time.monotonic()
        # The embedded pool's errors say what to do with its daemon; a real schedd's do not.
        fix = "" if self._embedded else (" What to do: check the schedd on the access point (`condor_q`; "
                                         "`condor_status -schedd`; its SchedLog); jobs stay in the queue while "
                                         "it restarts.")
        self._logger.warning(f"The schedd does not answer or refused a status check ({error}). htcannex keeps the "
                             f"jobs as they are and asks again at every status check; Ctrl-C ends the run.{fix}")

    def _answered(self) -> None:
        if self._down_since is not None:
            self._logger.warning(f"The schedd answers again, after {time.monotonic() - self._down_since:.0f} s")
            self._down_since = None
