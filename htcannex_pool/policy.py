"""The pool's job policies, configured by HTCondor's own macro names: the memory limits (memory.py)
and the expressions that hold, release, remove or evict a job, with HTCondor's hold codes.

Real pools differ here (HTCondor 25 manual, admin-manual/configuration/starter.rst, schedd.rst,
startd.rst), and a workflow must survive each:
- SYSTEM_PERIODIC_HOLD (+ _REASON, _SUBCODE): the schedd evaluates it in every job ad each
  PERIODIC_EXPR_INTERVAL; true holds the job with code 26 (SystemPolicy), the reason and subcode
  from the other two (default: "The system macro SYSTEM_PERIODIC_HOLD expression '...' evaluated
  to TRUE", 0), as src/condor_utils/user_job_policy.cpp words it.
- PREEMPT + WANT_HOLD (+ _REASON, _SUBCODE): the startd evaluates PREEMPT in the slot ad against
  the running job; when it is true the job is put on hold with code 21 (StartdHeldJob) if
  WANT_HOLD is true too, else evicted (src/condor_startd.V6/Resource.cpp, hold_job).

The configuration is `<spool>/condor_config.json` ({macro: value}), written by `Pool(config=...)`
and read by the daemon when it starts, so a pool restarted by anyone keeps its policy.
"""
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import classad2
from htcondor_codes import HoldCode, JobStatus, OutOfResources

from . import local_universe, memory, starter
from .eventlog import UserLog

if TYPE_CHECKING:
    from .schedd import Schedd

CONFIG_FILE = "condor_config.json"
PERIODIC_INTERVAL_S = 1.0  # HTCondor's PERIODIC_EXPR_INTERVAL, shortened for a test pool
EXPRESSIONS = ("SYSTEM_PERIODIC_HOLD", "SYSTEM_PERIODIC_HOLD_REASON", "SYSTEM_PERIODIC_HOLD_SUBCODE",
               "PREEMPT", "WANT_HOLD", "WANT_HOLD_REASON", "WANT_HOLD_SUBCODE")
MACROS = (*memory.MACROS, *EXPRESSIONS)


class PolicyConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Decision:
    """A policy's verdict on one running job: hold it (with reason and subcode) or evict it."""

    hold: bool
    reason: str = ""
    subcode: int = 0


class PoolPolicy:
    def __init__(self, config: Optional[dict] = None):
        config = dict(config or {})
        unknown = sorted(set(config) - set(MACROS))
        if unknown:
            raise PolicyConfigError(f"pool config: unknown macro(s) {', '.join(unknown)} "
                                    f"(known: {', '.join(MACROS)})")
        try:
            self.memory = memory.MemoryPolicy.from_config(config)
        except ValueError as error:
            raise PolicyConfigError(str(error)) from None
        self.expressions: dict[str, classad2.ExprTree] = {}
        for name in EXPRESSIONS:
            if name in config:
                try:
                    self.expressions[name] = classad2.ExprTree(str(config[name]))
                except Exception:
                    raise PolicyConfigError(f"pool config: {name} = {config[name]!r} is not a ClassAd "
                                            "expression") from None

    @classmethod
    def load(cls, spool: Path) -> "PoolPolicy":
        path = spool / CONFIG_FILE
        return cls(json.loads(path.read_text())) if path.exists() else cls()

    @staticmethod
    def save(spool: Path, config: dict) -> None:
        PoolPolicy(config)  # refuse a bad configuration before any daemon reads it
        (spool / CONFIG_FILE).write_text(json.dumps(config, indent=1))

    def system_periodic_hold(self, job: classad2.ClassAd) -> Optional[Decision]:
        """The schedd's SYSTEM_PERIODIC_HOLD on one job (hold code 26), or None."""
        if not self._true("SYSTEM_PERIODIC_HOLD", job):
            return None
        default = (f"The system macro SYSTEM_PERIODIC_HOLD expression "
                   f"'{self.expressions['SYSTEM_PERIODIC_HOLD']}' evaluated to TRUE")
        return Decision(True, self._string("SYSTEM_PERIODIC_HOLD_REASON", job) or default,
                        self._integer("SYSTEM_PERIODIC_HOLD_SUBCODE", job))

    def startd_preempts(self, slot: classad2.ClassAd, job: classad2.ClassAd) -> Optional[Decision]:
        """The startd's PREEMPT on a running job: hold it (code 21) when WANT_HOLD, else evict; or None."""
        if not self._true("PREEMPT", slot, job):
            return None
        if not self._true("WANT_HOLD", slot, job):
            return Decision(False, "The startd preempted the job (PREEMPT evaluated to true)")
        default = ("The startd put this job on hold.  (At preemption time, WANT_HOLD evaluated to true: "
                   f"WANT_HOLD = {self.expressions['WANT_HOLD']})")
        return Decision(True, self._string("WANT_HOLD_REASON", slot, job) or default,
                        self._integer("WANT_HOLD_SUBCODE", slot, job))

    def _value(self, name: str, scope: classad2.ClassAd, target: Optional[classad2.ClassAd]):
        expression = self.expressions.get(name)
        return None if expression is None else expression.eval(scope=scope, target=target)

    def _true(self, name, scope, target=None) -> bool:
        return self._value(name, scope, target) is True

    def _string(self, name, scope, target=None) -> str:
        value = self._value(name, scope, target)
        return value if isinstance(value, str) else ""

    def _integer(self, name, scope, target=None) -> int:
        value = self._value(name, scope, target)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _duration(seconds: int) -> str:
    days, rest = divmod(int(seconds), 86400)
    return f"{days}+{time.strftime('%H:%M:%S', time.gmtime(rest))}"


class JobPolicies:
    """The policies applied each pass, through the schedd's state changes: the limits on running jobs
    (memory, AllowedExecuteDuration, a removed local job's vacate time) and, each
    PERIODIC_INTERVAL_S, the job's periodic expressions, SYSTEM_PERIODIC_HOLD and the startd's PREEMPT."""

    def __init__(self, schedd: "Schedd", policy: PoolPolicy):
        self.schedd, self.policy = schedd, policy
        self.memory = memory.MemoryWatch(policy.memory)
        self._last_periodic = 0.0

    def watch_running(self, now: float):
        self.memory.begin_pass(now)
        schedd = self.schedd
        for key, running in list(schedd.running.items()):
            if running.process.returncode is not None:
                continue  # exited: its outputs are on their way back
            ad = schedd.jobs[key]
            pid = running.process.pid
            if local_universe.is_local(ad):
                if local_universe.overdue(running, now):
                    starter.kill_process_group(pid)
                continue  # no memory enforcement for local jobs (LOCAL_UNIVERSE_CGROUP_ENFORCEMENT)
            over = self.memory.over_limit(ad, pid, running.memory, lambda *sizes: UserLog(ad).image_size(*sizes))
            if over:
                schedd.hold(ad, over, HoldCode.JobOutOfResources, OutOfResources.Memory)
                continue
            if self.memory.out_of_memory_kill(pid, running.memory):
                continue  # it exits by the signal; the next pass reaps it
            allowed = ad.get("AllowedExecuteDuration")
            if allowed is not None and now - running.started > allowed:
                schedd.hold(ad, f"The job exceeded allowed execute duration of {_duration(allowed)}",
                            HoldCode.JobExecuteExceeded, 0)

    def periodic(self, now: float):
        if now - self._last_periodic < PERIODIC_INTERVAL_S:
            return
        self._last_periodic = now
        schedd = self.schedd
        for ad in list(schedd.jobs.values()):
            status = ad["JobStatus"]
            queued = status in (JobStatus.IDLE, JobStatus.RUNNING)
            if "PeriodicRemove" in ad and ad.eval("PeriodicRemove") is True:
                schedd.remove(ad, f"The job attribute PeriodicRemove expression "
                                  f"'{ad.lookup('PeriodicRemove')}' evaluated to TRUE")
            elif status == JobStatus.HELD and "PeriodicRelease" in ad and ad.eval("PeriodicRelease") is True:
                schedd.release(ad, f"The job attribute PeriodicRelease expression "
                                   f"'{ad.lookup('PeriodicRelease')}' evaluated to TRUE")
            elif queued and "PeriodicHold" in ad and ad.eval("PeriodicHold") is True:
                schedd.hold(ad, f"The job attribute PeriodicHold expression "
                                f"'{ad.lookup('PeriodicHold')}' evaluated to TRUE", HoldCode.JobPolicy, 0)
            elif queued and (held := self.policy.system_periodic_hold(ad)):
                schedd.hold(ad, held.reason, HoldCode.SystemPolicy, held.subcode)
            elif status == JobStatus.RUNNING:
                self._startd_policy(ad)

    def _startd_policy(self, ad: classad2.ClassAd):
        """The job's slot's PREEMPT / WANT_HOLD."""
        key = (ad["ClusterId"], ad["ProcId"])
        slot = next((slot for slot in self.schedd.annexes.slots() if slot.job == key), None)
        verdict = slot is not None and self.policy.startd_preempts(slot.ad, ad)
        if verdict and verdict.hold:
            self.schedd.hold(ad, verdict.reason, HoldCode.StartdHeldJob, verdict.subcode)
        elif verdict:
            self.schedd.evict(ad, verdict.reason)
