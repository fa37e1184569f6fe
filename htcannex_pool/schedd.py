"""The pool's schedd: the job queue and every change to it, and the client's requests.

The daemon calls these methods under one lock, from its request threads and from its cycle
thread; every change to a job is saved to the store (one row) and reported in the job's user
event log before the lock is released. The negotiator (negotiator.py) matches idle jobs to free
slots, the shadows (shadow.py) start and end runs, and the job policies (policy.py) hold, release,
remove and evict jobs: all through the state changes here.
"""
import re
import shutil
import time
from pathlib import Path

import classad2
from htcondor_codes import HoldCode, JobStatus, status_word

from . import jobads, local_universe, starter
from .annexes import Annexes
from .eventlog import UserLog, open_log
from .negotiator import Negotiator
from .protocol import RequestError
from .removal import BackgroundRemoval
from .slots import Slot, free_disk_kib
from .store import QueueStore

ACTIONS = ("Hold", "Release", "Remove", "RemoveX", "Vacate", "VacateFast")
# Attributes a client may not edit: they identify the job or are the schedd's to change.
PROTECTED_ATTRIBUTES = {"clusterid", "procid", "jobstatus", "mytype", "owner"}


def key_of(ad: classad2.ClassAd) -> tuple[int, int]:
    return ad["ClusterId"], ad["ProcId"]


def job_id(key: tuple[int, int]) -> str:
    return f"{key[0]}.{key[1]}"


def _constraint(text) -> classad2.ExprTree:
    text = "true" if text is None or str(text).strip() == "" else str(text)
    try:
        return classad2.ExprTree(text)
    except Exception:
        raise RequestError(f"malformed constraint {text!r}: not a ClassAd expression") from None


def _selected(ad: classad2.ClassAd, constraint: classad2.ExprTree) -> bool:
    return constraint.eval(ad) is True


def _project(ad: classad2.ClassAd, projection: list[str]) -> str:
    if not projection:
        return repr(ad)
    projected = classad2.ClassAd()
    for attribute in projection:
        if attribute in ad:
            projected[attribute] = ad.lookup(attribute)
    return repr(projected)


def _keep_hold_as_last(ad: classad2.ClassAd) -> None:
    """A job leaving the held state (released or removed) keeps its hold as LastHoldReason*."""
    for attribute in ("HoldReason", "HoldReasonCode", "HoldReasonSubCode"):
        if attribute in ad:
            ad[f"Last{attribute}"] = ad.lookup(attribute)
            del ad[attribute]


class Schedd:
    def __init__(self, spool: Path, origin: Path, ordinary_slot_specs: list[dict]):
        self.spool, self.origin = spool, origin
        self.execute_dir = spool / "execute"
        self.store = QueueStore(spool / "queue.sqlite3")
        self.jobs = {key_of(ad): ad for ad in self.store.jobs()}
        self.running: dict[tuple[int, int], starter.RunningJob] = {}
        self.negotiator = Negotiator()
        self.annexes = Annexes(self.store, ordinary_slot_specs, free_disk_kib(spool), self.negotiator,
                               evict=lambda key, why: self.evict(self.jobs[key], why))
        self._recover()
        self.sandbox_removal = BackgroundRemoval(self.execute_dir / "being-removed")

    # ---- start-up and shutdown

    def _recover(self):
        """Jobs a previous daemon was running go back to idle and run again, as after
        a schedd restart without job reconnection; their leftover processes are killed."""
        for ad in list(self.jobs.values()):
            if "PoolProcessId" in ad and ad["JobStatus"] in (JobStatus.RUNNING, JobStatus.REMOVED):
                starter.kill_leftover(ad["PoolProcessId"], ad["PoolProcessCreateTime"])
            if ad["JobStatus"] == JobStatus.RUNNING:
                self.become_idle_after_eviction(ad)
            elif ad["JobStatus"] == JobStatus.REMOVED:  # a local job removed while its process still ran
                self.finish_removal(ad)
        shutil.rmtree(self.execute_dir, ignore_errors=True)
        shutil.rmtree(self.spool / local_universe.SCRATCH_ROOT, ignore_errors=True)

    def shutdown(self):
        """Stop running jobs; they are evicted and run again when the pool next starts."""
        for key in list(self.running):
            if self.jobs[key]["JobStatus"] == JobStatus.REMOVED:
                self.stop(key, "the pool is shutting down")
                self.finish_removal(self.jobs[key])
            else:
                self.evict(self.jobs[key], "the pool is shutting down")
        self.store.close()

    def signal_local_shutdown(self) -> list[tuple[starter.RunningJob, float]]:
        """Signal the running local jobs as a schedd shutting down does: [(job, when it is killed)]."""
        return [(running, local_universe.signal_shutdown(self.jobs[key], running))
                for key, running in self.running.items()
                if local_universe.is_local(self.jobs[key]) and self.jobs[key]["JobStatus"] != JobStatus.REMOVED]

    def has_work(self) -> bool:
        """Whether the daemon must stay up: jobs that can still change state on their own."""
        return bool(self.running) or any(
            ad["JobStatus"] in (JobStatus.IDLE, JobStatus.RUNNING) or "PeriodicRelease" in ad or "PeriodicRemove" in ad
            for ad in self.jobs.values())

    def submit(self, items: dict, procs: list[dict], submit_dir: str, owner: str,
               environment: dict | None) -> dict:
        cluster = self.store.next_cluster_id()
        try:
            ads = jobads.build_cluster(items, procs, cluster=cluster, submit_dir=submit_dir,
                                       owner=owner, submit_environment=environment)
        except (jobads.SubmitError, OSError) as error:
            raise RequestError(f"submit rejected, nothing queued: {error}") from None
        for path in {ad["UserLog"] for ad in ads if UserLog(ad).writable}:
            try:
                open_log(path).close()
            except OSError as error:
                raise RequestError(f"submit rejected, nothing queued: log = {path} cannot be written: "
                                   f"{error.strerror}") from None
        self.store.save(*ads)
        for ad in ads:
            self.jobs[key_of(ad)] = ad
            # Submitted on hold or not, the log gets only the submit event (as HTCondor's schedd).
            UserLog(ad).submitted()
        self.negotiator.needed = True
        return {"cluster": cluster, "first_proc": 0, "num_procs": len(ads)}

    def select(self, spec, not_found: list[str] | None = None) -> list[classad2.ClassAd]:
        """The job ads `spec` names. A job id or a cluster with no job in the queue is an error;
        given `not_found` (schedd.act), it selects nothing and a job id is listed there instead."""
        if isinstance(spec, list):
            return [ad for item in spec for ad in self.select(str(item), not_found)]
        text = str(spec).strip()
        if re.fullmatch(r"\d+\.\d+", text):
            key = tuple(int(part) for part in text.split("."))
            if key in self.jobs:
                return [self.jobs[key]]
            if not_found is None:
                raise RequestError(f"job {text} is not in the queue")
            not_found.append(text)
            return []
        if re.fullmatch(r"\d+", text):
            selected = [ad for key, ad in self.jobs.items() if key[0] == int(text)]
            if not selected and not_found is None:
                raise RequestError(f"cluster {text} has no jobs in the queue")
            return selected
        constraint = _constraint(text)
        return [ad for ad in self.jobs.values() if _selected(ad, constraint)]

    def act(self, action: str, spec, reason: str | None) -> dict:
        """As HTCondor's schedd: a job that is not in the queue (it ended, or was removed) is counted
        in TotalNotFound, not an error, so removing jobs that may have just left is safe."""
        if action not in ACTIONS:
            raise RequestError(f"job action {action!r} is not supported by the embedded pool "
                               f"(supported: {', '.join(ACTIONS)})")
        reason = reason or "Python-initiated action"
        done = skipped = 0
        not_found: list[str] = []
        with self.store.transaction():
            for ad in self.select(spec, not_found):
                if self._act_on(action, ad, reason):
                    done += 1
                else:
                    skipped += 1
        return {"TotalSuccess": done, "TotalBadStatus": skipped, "TotalNotFound": len(not_found),
                "TotalJobAds": done + skipped}

    def _act_on(self, action: str, ad: classad2.ClassAd, reason: str) -> bool:
        """Apply one action to one job; False if the job's status does not allow it."""
        status = ad["JobStatus"]
        if action == "Hold" and status in (JobStatus.IDLE, JobStatus.RUNNING):
            self.hold(ad, reason, HoldCode.UserRequest, 0)
        elif action == "Release" and status == JobStatus.HELD:
            self.release(ad, reason)
        elif action == "Remove" and status == JobStatus.REMOVED:
            return False  # already on its way out (a local job given time to end)
        elif action in ("Remove", "RemoveX"):
            self.remove(ad, reason)
        elif action in ("Vacate", "VacateFast") and status == JobStatus.RUNNING:
            self.evict(ad, reason)
        else:
            return False
        return True

    def edit(self, spec, attribute: str, value: str) -> int:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", attribute or ""):
            raise RequestError(f"edit: {attribute!r} is not a ClassAd attribute name")
        if attribute.lower() in PROTECTED_ATTRIBUTES:
            raise RequestError(f"edit: attribute {attribute} is managed by the schedd and cannot be edited")
        try:
            expression = classad2.ExprTree(str(value))
        except Exception:
            raise RequestError(f"edit: value {value!r} for {attribute} is not a ClassAd expression") from None
        selected = self.select(spec)
        for ad in selected:
            ad[attribute] = expression
            self.negotiator.forget(key_of(ad))
        self.store.save(*selected)
        self.negotiator.needed = True
        return len(selected)

    def query(self, constraint, projection: list[str]) -> list[str]:
        constraint = _constraint(constraint)
        return [_project(ad, projection) for ad in self.jobs.values() if _selected(ad, constraint)]

    def history(self, constraint, projection: list[str], match: int) -> list[str]:
        constraint = _constraint(constraint)
        found = []
        for ad in self.store.history():
            if _selected(ad, constraint):
                found.append(_project(ad, projection))
                if len(found) == match:
                    break
        return found

    def slot_ads(self, constraint, projection: list[str]) -> list[str]:
        constraint = _constraint(constraint)
        return [_project(slot.ad, projection) for slot in self.annexes.slots() if _selected(slot.ad, constraint)]

    def status(self) -> dict:
        counts = {}
        for ad in self.jobs.values():
            word = status_word(ad["JobStatus"])
            counts[word] = counts.get(word, 0) + 1
        return {"jobs": counts, "annexes": self.annexes.summaries(), "origin": str(self.origin)}

    # ---- state changes (each saved and logged)

    def set_status(self, ad: classad2.ClassAd, status: int):
        ad["LastJobStatus"] = ad["JobStatus"]
        ad["JobStatus"] = status
        ad["EnteredCurrentStatus"] = int(time.time())

    def stop(self, key: tuple[int, int], why: str) -> Slot | None:
        """Kill a running job's process and free its slot; returns the slot."""
        running = self.running.pop(key, None)
        if running is None:
            return None
        if running.process.returncode is None:  # not one that has exited and is sending its outputs
            running.kill(why)
            starter.record_usage(self.jobs[key], running)
        return self.release_slot(running)

    def slot_named(self, name: str) -> Slot | None:
        return next((slot for slot in self.annexes.slots() if slot.name == name), None)

    def release_slot(self, running: starter.RunningJob) -> Slot | None:
        self.sandbox_removal.remove(running.sandbox)
        self.negotiator.needed = True
        slot = self.slot_named(running.slot_name)
        if slot is not None:
            slot.job = None
            slot.ad.update({"State": "Unclaimed", "Activity": "Idle"})
        return slot

    def become_idle_after_eviction(self, ad: classad2.ClassAd, run_bytes: tuple[float, float] = (0, 0)):
        for attribute in ("RemoteHost", "PoolProcessId", "PoolProcessCreateTime"):
            if attribute in ad:
                del ad[attribute]
        self.set_status(ad, JobStatus.IDLE)
        UserLog(ad).evicted(run_bytes)
        self.store.save(ad)
        self.negotiator.needed = True

    def evict(self, ad: classad2.ClassAd, why: str):
        running = self.running.get(key_of(ad))
        self.stop(key_of(ad), why)
        ad["LastVacateReason"] = why
        self.become_idle_after_eviction(ad, (0, running.bytes_received) if running else (0, 0))

    def hold(self, ad: classad2.ClassAd, reason: str, code: int, subcode: int):
        self.stop(key_of(ad), reason)
        ad.update({"HoldReason": reason, "HoldReasonCode": code, "HoldReasonSubCode": subcode})
        self.set_status(ad, JobStatus.HELD)
        UserLog(ad).held(reason, code, subcode)
        self.store.save(ad)

    def release(self, ad: classad2.ClassAd, reason: str):
        _keep_hold_as_last(ad)
        self.set_status(ad, JobStatus.IDLE)
        UserLog(ad).released(reason)
        self.store.save(ad)
        self.negotiator.needed = True

    def remove(self, ad: classad2.ClassAd, reason: str):
        running = self.running.get(key_of(ad))
        ad["RemoveReason"] = reason
        # A held job removed keeps why it was held as LastHoldReason* (HTCondor 25.14: in the
        # history, HoldReason is undefined and LastJobStatus is 5).
        _keep_hold_as_last(ad)
        self.set_status(ad, JobStatus.REMOVED)
        if running is not None and local_universe.is_local(ad) and ad["LastJobStatus"] != JobStatus.REMOVED:
            # It gets its remove signal and time to end; it leaves the queue when it has exited.
            local_universe.signal_removal(ad, running, reason)
            self.store.save(ad)
            return
        self.stop(key_of(ad), reason)
        self.finish_removal(ad)

    def finish_removal(self, ad: classad2.ClassAd):
        UserLog(ad).aborted(ad["RemoveReason"])
        self.retire(ad)

    def retire(self, ad: classad2.ClassAd):
        self.store.retire(ad)
        del self.jobs[key_of(ad)]
        self.negotiator.forget(key_of(ad))
