"""The pool's job policies, configured by HTCondor's own macro names: how a job that uses more memory
than it requested is stopped, and with which hold code.

Real pools differ here (HTCondor 25 manual, admin-manual/configuration/starter.rst, schedd.rst,
startd.rst), and a workflow must survive each:
- CGROUP_MEMORY_LIMIT_POLICY = hard (the default): the starter's cgroup limit holds the job with
  34/102 (JobOutOfResources, memory). `none`: nothing is enforced by the starter.
- BASE_CGROUP = "" (an execute point without per-job cgroups, as an unprivileged annex or glidein
  runs; default `htcondor`; the pool's own slots: an annex's have none unless created with them,
  slots.Annex.cgroups): no cgroup limit, and a job's memory is what the procd's snapshots saw:
  one as the job starts (src/condor_procd/proc_family_monitor.cpp, register_subfamily), then all
  jobs' on one clock each PID_SNAPSHOT_INTERVAL seconds (default 15), none after the job's last:
  a 100-MB peak held for 3 s was reported at the job's 5.8-MB start on a 25.14.0 pool, as was the
  same peak from 3 s to 5 s after the start in about half of the tries (the clock's phase). With a
  cgroup the starter reads its memory.peak (src/condor_utils/proc_family_direct_cgroup_v2.cpp):
  the pool samples memory every cycle.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import classad2

from htcondor_codes import PARAM_DEFAULTS_S

CONFIG_FILE = "condor_config.json"
MEMORY_LIMIT_POLICIES = ("hard", "none")
EXPRESSIONS = ("SYSTEM_PERIODIC_HOLD", "SYSTEM_PERIODIC_HOLD_REASON", "SYSTEM_PERIODIC_HOLD_SUBCODE",
               "PREEMPT", "WANT_HOLD", "WANT_HOLD_REASON", "WANT_HOLD_SUBCODE")
MACROS = ("CGROUP_MEMORY_LIMIT_POLICY", "BASE_CGROUP", "PID_SNAPSHOT_INTERVAL", *EXPRESSIONS)
DEFAULT_BASE_CGROUP = "htcondor"


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
        self.memory_limit = config.get("CGROUP_MEMORY_LIMIT_POLICY", "hard")
        if self.memory_limit not in MEMORY_LIMIT_POLICIES:
            raise PolicyConfigError(f"pool config: CGROUP_MEMORY_LIMIT_POLICY = {self.memory_limit!r}; "
                                    f"use one of {', '.join(MEMORY_LIMIT_POLICIES)}")
        self.cgroups = config.get("BASE_CGROUP", DEFAULT_BASE_CGROUP) != ""
        interval = config.get("PID_SNAPSHOT_INTERVAL", PARAM_DEFAULTS_S["PID_SNAPSHOT_INTERVAL"])
        try:
            self.snapshot_interval_s = float(str(interval))  # a number, or its text as a condor_config has it
        except ValueError:
            self.snapshot_interval_s = 0.0
        if isinstance(interval, bool) or not self.snapshot_interval_s > 0:
            raise PolicyConfigError(f"pool config: PID_SNAPSHOT_INTERVAL = {interval!r}; use a number of "
                                    "seconds above 0")
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
