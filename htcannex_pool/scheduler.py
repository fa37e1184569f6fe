"""The pool's schedd, negotiator and shadows: all queue state, changed only here.

The daemon calls these methods under one lock, from its request threads and
from its cycle thread; every change to a job is saved to the store (one row)
and reported in the job's user event log before the lock is released.
"""
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import classad2
from htcondor_codes import (CHECKPOINT_EXIT_CODE, MEMORY_USAGE, WANT_FT_ON_CHECKPOINT, HoldCode, JobStatus,
                            OutOfResources, status_word)

from . import dollardollar, jobads, local_universe, starter, transfer
from .exits import ExitWatch
from .eventlog import UserLog, open_log
from .output_transfer import Outcome, OutputTransfers
from .policy import PoolPolicy
from .removal import BackgroundRemoval
from .slots import Annex, Slot, free_disk_kib, ordinary_slots
from .store import QueueStore

ACTIONS = ("Hold", "Release", "Remove", "RemoveX", "Vacate", "VacateFast")
PERIODIC_INTERVAL_S = 1.0  # HTCondor's PERIODIC_EXPR_INTERVAL, shortened for a test pool
MEMORY_SAMPLE_S = 0.1
# Attributes a client may not edit: they identify the job or are the schedd's to change.
PROTECTED_ATTRIBUTES = {"clusterid", "procid", "jobstatus", "mytype", "owner"}


def _record_usage(ad: classad2.ClassAd, running: starter.RunningJob):
    """What the run used, into the job ad as the starter reports it: CPU seconds of this run
    (RemoteUserCpu/RemoteSysCpu) and of all runs (Cumulative*), average cores (CpusUsage),
    peak memory (ResidentSetSize, KiB, and MemoryUsage) and sandbox size (DiskUsage, KiB)."""
    user, system = running.cpu_seconds
    wall = max(time.time() - running.started, 1e-3)
    ad.update({"RemoteUserCpu": user, "RemoteSysCpu": system,
               "CumulativeRemoteUserCpu": ad.get("CumulativeRemoteUserCpu", 0.0) + user,
               "CumulativeRemoteSysCpu": ad.get("CumulativeRemoteSysCpu", 0.0) + system,
               "CpusUsage": round((user + system) / wall, 2)})
    _record_memory(ad, max(ad.get("ResidentSetSize_RAW", 0), running.peak_rss_kib))
    jobads.set_rounded(ad, "DiskUsage", max(ad.get("DiskUsage_RAW", 0), running.disk_kib()))


def _record_memory(ad: classad2.ClassAd, resident_kib: int):
    """Resident memory into the job ad as the schedd keeps it: rounded, and MemoryUsage (MB) an expression of
    the rounded value, which a memory policy on MemoryUsage judges. The pool's ImageSize is the resident size."""
    jobads.set_rounded(ad, "ResidentSetSize", resident_kib)
    jobads.set_rounded(ad, "ImageSize", resident_kib)
    ad["MemoryUsage"] = classad2.ExprTree(MEMORY_USAGE)


class RequestError(ValueError):
    """A client's request that cannot be carried out; the message says why."""


def _key(ad: classad2.ClassAd) -> tuple[int, int]:
    return ad["ClusterId"], ad["ProcId"]


def _job_id(key: tuple[int, int]) -> str:
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


def _duration(seconds: int) -> str:
    days, rest = divmod(int(seconds), 86400)
    return f"{days}+{time.strftime('%H:%M:%S', time.gmtime(rest))}"


class Scheduler:
    def __init__(self, spool: Path, origin: Path, ordinary_slot_specs: list[dict],
                 on_job_exit: Callable[[], None] = lambda: None):
        self.spool, self.origin = spool, origin
        self.policy = PoolPolicy.load(spool)
        # `on_job_exit` is called from another thread as soon as a job's process exits or its
        # outputs are back.
        self.exit_watch = ExitWatch(on_job_exit)
        self.execute_dir = spool / "execute"
        self.checkpoint_dir = spool / "checkpoints"
        self.store = QueueStore(spool / "queue.sqlite3")
        self.jobs = {_key(ad): ad for ad in self.store.jobs()}
        self.running: dict[tuple[int, int], starter.RunningJob] = {}
        self.disk_kib = free_disk_kib(spool)
        self.ordinary = ordinary_slots(ordinary_slot_specs, self.disk_kib)
        self.annexes = {spec["name"]: Annex(spec) for spec in self.store.annexes()}
        self.fail_next_transfer = False
        self.negotiate_needed = True
        # Bumped whenever slots appear or go; see _negotiate.
        self.slot_set_version = 0
        self.unmatchable: dict[tuple[int, int], int] = {}
        self._last_periodic = 0.0
        self._last_memory_sample = 0.0
        self._next_snapshot = 0.0
        self._recover()
        self.sandbox_removal = BackgroundRemoval(self.execute_dir / "being-removed")
        self.output_transfers = OutputTransfers(origin, on_job_exit)

    # ---- start-up and shutdown

    def _recover(self):
        """Jobs a previous daemon was running go back to idle and run again, as after
        a schedd restart without job reconnection; their leftover processes are killed."""
        for ad in list(self.jobs.values()):
            if "PoolProcessId" in ad and ad["JobStatus"] in (JobStatus.RUNNING, JobStatus.REMOVED):
                starter.kill_leftover(ad["PoolProcessId"], ad["PoolProcessCreateTime"])
            if ad["JobStatus"] == JobStatus.RUNNING:
                self._become_idle_after_eviction(ad)
            elif ad["JobStatus"] == JobStatus.REMOVED:  # a local job removed while its process still ran
                self._finish_removal(ad)
        shutil.rmtree(self.execute_dir, ignore_errors=True)
        shutil.rmtree(self.spool / local_universe.SCRATCH_ROOT, ignore_errors=True)

    def shutdown(self):
        """Stop running jobs; they are evicted and run again when the pool next starts."""
        for key in list(self.running):
            if self.jobs[key]["JobStatus"] == JobStatus.REMOVED:
                self._stop(key, "the pool is shutting down")
                self._finish_removal(self.jobs[key])
            else:
                self._evict(self.jobs[key], "the pool is shutting down")
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

    # ---- client requests

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
            self.jobs[_key(ad)] = ad
            # Submitted on hold or not, the log gets only the submit event (as HTCondor's schedd).
            UserLog(ad).submitted()
        self.negotiate_needed = True
        return {"cluster": cluster, "first_proc": 0, "num_procs": len(ads)}

    def _select(self, spec, not_found: list[str] | None = None) -> list[classad2.ClassAd]:
        """The job ads `spec` names. A job id or a cluster with no job in the queue is an error;
        given `not_found` (schedd.act), it selects nothing and a job id is listed there instead."""
        if isinstance(spec, list):
            return [ad for item in spec for ad in self._select(str(item), not_found)]
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
            for ad in self._select(spec, not_found):
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
            self._hold(ad, reason, HoldCode.UserRequest, 0)
        elif action == "Release" and status == JobStatus.HELD:
            self._release(ad, reason)
        elif action == "Remove" and status == JobStatus.REMOVED:
            return False  # already on its way out (a local job given time to end)
        elif action in ("Remove", "RemoveX"):
            self._remove(ad, reason)
        elif action in ("Vacate", "VacateFast") and status == JobStatus.RUNNING:
            self._evict(ad, reason)
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
        selected = self._select(spec)
        for ad in selected:
            ad[attribute] = expression
            self.unmatchable.pop(_key(ad), None)
        self.store.save(*selected)
        self.negotiate_needed = True
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
        return [_project(slot.ad, projection) for slot in self._slots() if _selected(slot.ad, constraint)]

    def create_annex(self, spec: dict):
        name = spec.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            raise RequestError(f"create_annex: name {name!r} must be letters, digits, '.', '_' or '-'")
        if name in self.annexes and self.annexes[name].state(time.time()) != "expired":
            raise RequestError(f"create_annex: an annex named {name} already exists")
        if not spec.get("owner"):
            raise RequestError(f"create_annex {name}: owner is required "
                               "(the annex only runs that owner's jobs)")
        for field in ("nodes", "cpus", "memory_mb", "lifetime_s"):
            if not isinstance(spec.get(field), (int, float)) or spec[field] <= 0:
                raise RequestError(f"create_annex {name}: {field} must be a positive number, "
                                   f"got {spec.get(field)!r}")
        if not isinstance(spec.get("transfer_methods", ""), str):
            raise RequestError(f"create_annex {name}: transfer_methods must be a string of URL methods "
                               f"(e.g. \"osdf,https\"), got {spec['transfer_methods']!r}")
        for flag in ("containers", "cgroups"):
            if not isinstance(spec.get(flag, False), bool):
                raise RequestError(f"create_annex {name}: {flag} must be true or false, got {spec[flag]!r}")
        annex = Annex({**spec, "created": time.time()})
        self.annexes[name] = annex
        self.store.save_annex(annex.spec)

    def remove_annex(self, name: str):
        annex = self._annex(name)
        self._retire_slots(annex, f"annex {name} was removed")
        del self.annexes[name]
        self.store.delete_annex(name)

    def annex_summaries(self) -> list[dict]:
        now = time.time()
        return [annex.summary(now) for annex in self.annexes.values()]

    def status(self) -> dict:
        counts = {}
        for ad in self.jobs.values():
            word = status_word(ad["JobStatus"])
            counts[word] = counts.get(word, 0) + 1
        return {"jobs": counts, "annexes": self.annex_summaries(), "origin": str(self.origin)}

    def inject_expire_annex(self, name: str):
        annex = self._annex(name)
        self._expire(annex)

    def inject_fail_next_transfer(self):
        self.fail_next_transfer = True

    def inject_kill_job(self, job_id: str):
        """The job's execute node crashes: the process dies and the job is evicted to idle."""
        if not re.fullmatch(r"\d+\.\d+", str(job_id)):
            raise RequestError(f"inject_kill_job: {job_id!r} is not a job id (give C.P, e.g. 12.0)")
        [ad] = self._select(str(job_id))
        if _key(ad) not in self.running:
            raise RequestError(f"inject_kill_job: job {job_id} is not running")
        self._evict(ad, "the execute node crashed (injected fault)")

    # ---- state changes (each saved and logged)

    def _set_status(self, ad: classad2.ClassAd, status: int):
        ad["LastJobStatus"] = ad["JobStatus"]
        ad["JobStatus"] = status
        ad["EnteredCurrentStatus"] = int(time.time())

    def _stop(self, key: tuple[int, int], why: str) -> Slot | None:
        """Kill a running job's process and free its slot; returns the slot."""
        running = self.running.pop(key, None)
        if running is None:
            return None
        if running.process.returncode is None:  # not one that has exited and is sending its outputs
            running.kill(why)
            _record_usage(self.jobs[key], running)
        return self._release_slot(running)

    def _slot_named(self, name: str) -> Slot | None:
        return next((slot for slot in self._slots() if slot.name == name), None)

    def _release_slot(self, running: starter.RunningJob) -> Slot | None:
        self.sandbox_removal.remove(running.sandbox)
        self.negotiate_needed = True
        slot = self._slot_named(running.slot_name)
        if slot is not None:
            slot.job = None
            slot.ad.update({"State": "Unclaimed", "Activity": "Idle"})
        return slot

    def _become_idle_after_eviction(self, ad: classad2.ClassAd, run_bytes: tuple[float, float] = (0, 0)):
        for attribute in ("RemoteHost", "PoolProcessId", "PoolProcessCreateTime"):
            if attribute in ad:
                del ad[attribute]
        self._set_status(ad, JobStatus.IDLE)
        UserLog(ad).evicted(run_bytes)
        self.store.save(ad)
        self.negotiate_needed = True

    def _evict(self, ad: classad2.ClassAd, why: str):
        running = self.running.get(_key(ad))
        self._stop(_key(ad), why)
        ad["LastVacateReason"] = why
        self._become_idle_after_eviction(ad, (0, running.bytes_received) if running else (0, 0))

    def _hold(self, ad: classad2.ClassAd, reason: str, code: int, subcode: int):
        self._stop(_key(ad), reason)
        ad.update({"HoldReason": reason, "HoldReasonCode": code, "HoldReasonSubCode": subcode})
        self._set_status(ad, JobStatus.HELD)
        UserLog(ad).held(reason, code, subcode)
        self.store.save(ad)

    def _release(self, ad: classad2.ClassAd, reason: str):
        _keep_hold_as_last(ad)
        self._set_status(ad, JobStatus.IDLE)
        UserLog(ad).released(reason)
        self.store.save(ad)
        self.negotiate_needed = True

    def _remove(self, ad: classad2.ClassAd, reason: str):
        running = self.running.get(_key(ad))
        ad["RemoveReason"] = reason
        # A held job removed keeps why it was held as LastHoldReason* (HTCondor 25.14: in the
        # history, HoldReason is undefined and LastJobStatus is 5).
        _keep_hold_as_last(ad)
        self._set_status(ad, JobStatus.REMOVED)
        if running is not None and local_universe.is_local(ad) and ad["LastJobStatus"] != JobStatus.REMOVED:
            # It gets its remove signal and time to end; it leaves the queue when it has exited.
            local_universe.signal_removal(ad, running, reason)
            self.store.save(ad)
            return
        self._stop(_key(ad), reason)
        self._finish_removal(ad)

    def _finish_removal(self, ad: classad2.ClassAd):
        UserLog(ad).aborted(ad["RemoveReason"])
        self._retire(ad)

    def _retire(self, ad: classad2.ClassAd):
        self.store.retire(ad)
        del self.jobs[_key(ad)]
        self.unmatchable.pop(_key(ad), None)

    # ---- annexes

    def _annex(self, name: str) -> Annex:
        if name not in self.annexes:
            raise RequestError(f"no annex named {name!r} (annexes: {', '.join(self.annexes) or 'none'})")
        return self.annexes[name]

    def _slots(self):
        yield from self.ordinary
        for annex in self.annexes.values():
            yield from annex.slots

    def _retire_slots(self, annex: Annex, why: str):
        for slot in annex.slots:
            if slot.job is not None:
                self._evict(self.jobs[slot.job], why)
        annex.slots = []
        self.slot_set_version += 1

    def _expire(self, annex: Annex):
        self._retire_slots(annex, f"annex {annex.name} reached the end of its lifetime")
        annex.spec["expired"] = True
        self.store.save_annex(annex.spec)

    def _annex_lifecycle(self, now: float):
        for annex in self.annexes.values():
            state = annex.state(now)
            if state == "up" and not annex.slots:
                annex.bring_up(self.disk_kib)
                self.slot_set_version += 1
                self.negotiate_needed = True
            if state == "up" and now >= annex.ends_at():
                self._expire(annex)

    # ---- running jobs

    def _checkpoint_dir(self, key: tuple[int, int]) -> Path:
        return self.checkpoint_dir / _job_id(key)

    def _start(self, ad: classad2.ClassAd, slot: Slot):
        key = _key(ad)
        ad["NumJobStarts"] += 1
        ad["JobRunCount"] += 1
        ad["NumShadowStarts"] += 1
        sandbox = self.execute_dir / f"dir_{key[0]}_{key[1]}_{ad['NumShadowStarts']}"
        log = UserLog(ad)
        try:
            # The schedd expands $$() against the slot before the shadow and starter see the job.
            job = dollardollar.expand(ad, slot.ad)
        except dollardollar.ExpansionError as error:
            self._hold(ad, str(error), HoldCode.Unspecified, 0)
            return
        try:
            received = 0
            if ad["ShouldTransferFiles"] == "YES":
                log.transfer("input", finished=False)
                if self.fail_next_transfer:
                    self.fail_next_transfer = False
                    raise transfer.TransferError(
                        HoldCode.TransferInputError, 110,
                        f"Transfer input files failure (injected fault) for job {_job_id(key)}")
                received = transfer.stage_in(job, sandbox, self.origin, self._checkpoint_dir(key))
                log.transfer("input", finished=True)
                before = transfer.snapshot(sandbox)
            else:
                sandbox.mkdir(parents=True)
                before = {}
            running = starter.launch(job, slot.ad, sandbox, before, self.exit_watch.watch)
        except transfer.TransferError as error:
            shutil.rmtree(sandbox, ignore_errors=True)
            self._hold(ad, str(error), error.code, error.subcode)
            return
        except OSError as error:
            self._hold_failed_start(ad, sandbox, slot.name, error)
            return
        now = int(time.time())
        running.bytes_received = received
        ad["BytesRecvd"] = ad.get("BytesRecvd", 0) + received
        annex = self.annexes.get(slot.ad.get("AnnexName"))
        running.cgroups = annex.cgroups if annex is not None else self.policy.cgroups
        # An annex's slot is its pilot's batch job (static slots: one job each), whose memory the batch
        # system's out-of-memory killer enforces.
        running.allocation_mb = slot.ad["Memory"] if annex is not None else None
        self.running[key] = running
        slot.job = key
        slot.ad.update({"State": "Claimed", "Activity": "Busy", "RemoteOwner": ad["Owner"],
                        "JobId": _job_id(key)})
        if "JobStartDate" not in ad:
            ad["JobStartDate"] = now
        ad.update({"RemoteHost": slot.name, "JobCurrentStartDate": now,
                   "JobCurrentStartExecutingDate": now, "PoolProcessId": running.process.pid,
                   "PoolProcessCreateTime": running.create_time})
        # What the slot gives the job: the Allocated column of the event log's resources table.
        ad.update({f"{name}Provisioned": slot.ad[name] for name in ("Cpus", "Memory", "Disk", "GPUs")
                   if name in slot.ad})
        self._set_status(ad, JobStatus.RUNNING)
        log.executing(slot.ad, str(sandbox), ad.get("UserLogExecuteEventAttrs", ""))
        self.store.save(ad)

    def _hold_failed_start(self, ad: classad2.ClassAd, directory: Path, where: str, error: OSError):
        """The starter could not run the executable: held with code 6, the errno as subcode."""
        shutil.rmtree(directory, ignore_errors=True)
        self._hold(ad, f"Error from {where}: Failed to execute '{ad['Cmd']}': {error}",
                   HoldCode.FailedToCreateProcess, error.errno or 0)

    def _start_local_jobs(self):
        for key, ad in list(self.jobs.items()):
            if ad["JobStatus"] == JobStatus.IDLE and local_universe.is_local(ad):
                self._start_local(ad)

    def _start_local(self, ad: classad2.ClassAd):
        key = _key(ad)
        ad["NumJobStarts"] += 1
        scratch = self.spool / local_universe.SCRATCH_ROOT / f"dir_{key[0]}_{key[1]}_{ad['NumJobStarts']}"
        try:
            running = local_universe.launch(ad, scratch, self.exit_watch.watch)
        except OSError as error:
            self._hold_failed_start(ad, scratch, "starter on the access point", error)
            return
        now = int(time.time())
        self.running[key] = running
        if "JobStartDate" not in ad:
            ad["JobStartDate"] = now
        ad.update({"JobCurrentStartDate": now, "PoolProcessId": running.process.pid,
                   "PoolProcessCreateTime": running.create_time})
        self._set_status(ad, JobStatus.RUNNING)
        UserLog(ad).executing_locally()
        self.store.save(ad)

    def _exited_locally(self, ad: classad2.ClassAd, running: starter.RunningJob, returncode: int):
        _record_usage(ad, running)
        self._release_slot(running)  # its scratch directory; a local job holds no slot
        for attribute in ("PoolProcessId", "PoolProcessCreateTime"):
            if attribute in ad:
                del ad[attribute]
        log = UserLog(ad)
        if ad["JobStatus"] == JobStatus.REMOVED:
            log.evicted()  # the local starter logs an eviction for a removed job, then the schedd the abort
            self._finish_removal(ad)
            return
        if not local_universe.removed_on_exit(ad, returncode):
            log.requeued_after_exit(ad.get("ExitCode"), signal=ad.get("ExitSignal") if returncode < 0 else None)
            self._set_status(ad, JobStatus.IDLE)
            self.store.save(ad)
            self.negotiate_needed = True
            return
        log.terminated(ad.get("ExitCode"), signal=-returncode if returncode < 0 else None)
        ad["CompletionDate"] = int(time.time())
        self._set_status(ad, JobStatus.COMPLETED)
        self._retire(ad)

    def _exited(self, running: starter.RunningJob, returncode: int):
        key = running.key
        ad = self.jobs[key]
        if local_universe.is_local(ad):
            del self.running[key]
            self._exited_locally(ad, running, returncode)
            return
        _record_usage(ad, running)
        if ad.get(WANT_FT_ON_CHECKPOINT) is True and returncode == ad.get(CHECKPOINT_EXIT_CODE):
            self._restart_in_place(ad, running)
            return
        if ad["ShouldTransferFiles"] == "YES":
            # Still running on its slot until its outputs are back (output_transfer.py).
            UserLog(ad).transfer("output", finished=False)
            # Expanded from the MATCH_* values the start kept (the slot may be gone by now).
            self.output_transfers.send(dollardollar.expand(ad, None), running, self._succeeded(ad, returncode))
            return
        del self.running[key]
        self._ended(ad, running, 0)

    def _restart_in_place(self, ad: classad2.ClassAd, running: starter.RunningJob):
        """A self-checkpointing job exited with its checkpoint code: its checkpoint files go to the
        spool, then the starter runs the executable again in the same sandbox on the same slot with
        the same arguments (self-checkpointing-applications.rst; vanilla_proc.cpp
        restartCheckpointedJob: UploadCheckpointFiles, then StartJob). The shadow logs the upload as
        an output transfer; there is no new match, input transfer or execute event, and the start
        counts stay (a real 25.14.0 pool: one execute event, NumJobStarts 1, the job's files kept).
        The spooled files come back only to a fresh sandbox, after an eviction (_start)."""
        key = running.key
        logged = ad["ShouldTransferFiles"] == "YES"  # without file transfer the starter uploads nothing
        if logged:
            UserLog(ad).transfer("output", finished=False)
        transfer.save_checkpoint(ad, running.sandbox, self._checkpoint_dir(key))
        if logged:
            UserLog(ad).transfer("output", finished=True)
        slot = self._slot_named(running.slot_name)
        try:
            # Expanded from the MATCH_* values the start kept, as the first run's ad was.
            restarted = starter.launch(dollardollar.expand(ad, None), slot.ad, running.sandbox,
                                       running.inputs_before, self.exit_watch.watch)
        except OSError as error:  # the job removed or broke its own executable (the hold frees the slot)
            self._hold_failed_start(ad, running.sandbox, slot.name, error)
            return
        # One run, as the shadow sees it: its input bytes and the memory it has reported go on.
        restarted.bytes_received = running.bytes_received
        restarted.peak_rss_kib, restarted.reported_rss_kib = running.peak_rss_kib, running.reported_rss_kib
        restarted.cgroups, restarted.allocation_mb = running.cgroups, running.allocation_mb
        self.running[key] = restarted
        ad.update({"PoolProcessId": restarted.process.pid, "PoolProcessCreateTime": restarted.create_time})
        self.store.save(ad)

    @staticmethod
    def _succeeded(ad: classad2.ClassAd, returncode: int) -> bool:
        return returncode == ad.get("JobSuccessExitCode", 0)

    def _finish_output_transfers(self):
        for running, outcome in self.output_transfers.finished():
            if self.running.get(running.key) is not running:
                continue  # removed, held or evicted while its outputs were on their way
            del self.running[running.key]
            self._ended(self.jobs[running.key], running, outcome)

    def _ended(self, ad: classad2.ClassAd, running: starter.RunningJob, outcome: Outcome):
        """A job's process has exited and its outputs are back (`outcome`: the bytes sent) or
        failed to come back (the TransferError, which holds the job)."""
        log = UserLog(ad)
        returncode = running.process.returncode
        if isinstance(outcome, transfer.TransferError):
            self._release_slot(running)
            self._hold(ad, str(outcome), outcome.code, outcome.subcode)
            return
        if ad["ShouldTransferFiles"] == "YES":
            log.transfer("output", finished=True)
        sent = outcome
        ad["BytesSent"] = ad.get("BytesSent", 0) + sent
        run_bytes = (sent, running.bytes_received)
        self._release_slot(running)
        ad["NumJobCompletions"] += 1
        if returncode < 0:
            ad.update({"ExitBySignal": True, "ExitSignal": -returncode})
            log.terminated(None, signal=-returncode, run_bytes=run_bytes)
        else:
            ad.update({"ExitBySignal": False, "ExitCode": returncode})
            retries = ad.get("JobMaxRetries")
            if not self._succeeded(ad, returncode) and retries is not None and ad["NumJobCompletions"] <= retries:
                log.requeued_after_exit(returncode, run_bytes)
                self._set_status(ad, JobStatus.IDLE)
                self.store.save(ad)
                return
            log.terminated(returncode, run_bytes=run_bytes)
        ad["CompletionDate"] = int(time.time())
        shutil.rmtree(self._checkpoint_dir(_key(ad)), ignore_errors=True)
        self._set_status(ad, JobStatus.COMPLETED)
        self._retire(ad)

    def _monitor(self, now: float):
        # Reap every pass. Memory (costly to sample with many jobs): with cgroups at most every MEMORY_SAMPLE_S,
        # as memory.peak sees it; without, the procd's snapshots: each job as it starts, and all of them on one
        # clock each PID_SNAPSHOT_INTERVAL (policy.py).
        sample_memory = now - self._last_memory_sample >= MEMORY_SAMPLE_S
        if sample_memory:
            self._last_memory_sample = now
        periodic_snapshot = now >= self._next_snapshot
        if periodic_snapshot:
            self._next_snapshot = now + self.policy.snapshot_interval_s
        for key, running in list(self.running.items()):
            if running.process.returncode is not None:
                continue  # exited already: its outputs are on their way back
            returncode = running.poll()
            if returncode is not None:
                self._exited(running, returncode)
                continue
            ad = self.jobs[key]
            if local_universe.is_local(ad):
                if local_universe.overdue(running, now):
                    starter.kill_process_group(running.process.pid)
                continue  # no memory enforcement for local jobs (LOCAL_UNIVERSE_CGROUP_ENFORCEMENT)
            if running.cgroups:
                measure = sample_memory
            else:
                measure = periodic_snapshot or not running.snapshot_at_start
                running.snapshot_at_start = True
            if measure and self._measure_memory(ad, running):
                continue  # held
            if sample_memory and running.out_of_memory_kill():
                continue  # it exits by the signal; the next pass reaps it
            allowed = ad.get("AllowedExecuteDuration")
            if allowed is not None and now - running.started > allowed:
                self._hold(ad, f"The job exceeded allowed execute duration of {_duration(allowed)}",
                           HoldCode.JobExecuteExceeded, 0)

    def _measure_memory(self, ad: classad2.ClassAd, running: starter.RunningJob) -> bool:
        """The job's memory now, into its ad and log when it grew; True when a cgroup limit held the job."""
        rss_kib = running.rss_kib()
        if rss_kib > running.reported_rss_kib * 1.1:
            running.reported_rss_kib = rss_kib
            _record_memory(ad, rss_kib)
            # The event carries what the starter measured (seen on a 25.14.0 pool), not the rounded ad.
            UserLog(ad).image_size(rss_kib, -(-rss_kib // 1024), rss_kib)
        if running.cgroups and self.policy.memory_limit == "hard" and rss_kib / 1024 > ad["RequestMemory"]:
            self._hold(ad, f"Job has gone over cgroup memory limit of {ad['RequestMemory']} megabytes. "
                           f"Peak usage: {running.peak_rss_kib // 1024} megabytes.  "
                           "Consider resubmitting with a higher request_memory.",
                       HoldCode.JobOutOfResources, OutOfResources.Memory)
            return True
        return False

    def _periodic(self, now: float):
        if now - self._last_periodic < PERIODIC_INTERVAL_S:
            return
        self._last_periodic = now
        for ad in list(self.jobs.values()):
            status = ad["JobStatus"]
            queued = status in (JobStatus.IDLE, JobStatus.RUNNING)
            if "PeriodicRemove" in ad and ad.eval("PeriodicRemove") is True:
                self._remove(ad, f"The job attribute PeriodicRemove expression "
                                 f"'{ad.lookup('PeriodicRemove')}' evaluated to TRUE")
            elif status == JobStatus.HELD and "PeriodicRelease" in ad and ad.eval("PeriodicRelease") is True:
                self._release(ad, f"The job attribute PeriodicRelease expression "
                                  f"'{ad.lookup('PeriodicRelease')}' evaluated to TRUE")
            elif queued and "PeriodicHold" in ad and ad.eval("PeriodicHold") is True:
                self._hold(ad, f"The job attribute PeriodicHold expression "
                               f"'{ad.lookup('PeriodicHold')}' evaluated to TRUE", HoldCode.JobPolicy, 0)
            elif queued and (held := self.policy.system_periodic_hold(ad)):
                self._hold(ad, held.reason, HoldCode.SystemPolicy, held.subcode)
            elif status == JobStatus.RUNNING:
                self._startd_policy(ad)

    def _startd_policy(self, ad: classad2.ClassAd):
        """The job's slot's PREEMPT / WANT_HOLD (policy.py)."""
        slot = next((slot for slot in self._slots() if slot.job == _key(ad)), None)
        verdict = slot is not None and self.policy.startd_preempts(slot.ad, ad)
        if verdict and verdict.hold:
            self._hold(ad, verdict.reason, HoldCode.StartdHeldJob, verdict.subcode)
        elif verdict:
            self._evict(ad, verdict.reason)

    def _negotiate(self):
        """Match idle jobs, oldest first, to free slots (both sides' Requirements, via classad2).

        A job that matches no slot at all, busy or free, is remembered as unmatchable
        until the set of slots changes or the job is edited, so a long queue of jobs
        waiting for an annex costs one lookup each per negotiation, not a match.
        """
        self.negotiate_needed = False
        slots = list(self._slots())
        free = [slot for slot in slots if slot.job is None]
        for key, ad in list(self.jobs.items()):
            if not free:
                return
            if (ad["JobStatus"] != JobStatus.IDLE or local_universe.is_local(ad)
                    or self.unmatchable.get(key) == self.slot_set_version):
                continue
            slot = next((slot for slot in free if ad.symmetricMatch(slot.ad)), None)
            if slot is None:
                if not any(ad.symmetricMatch(busy.ad) for busy in slots if busy.job is not None):
                    self.unmatchable[key] = self.slot_set_version
                continue
            self._start(ad, slot)
            if slot.job is not None:  # a start that failed (held job) leaves the slot free
                free.remove(slot)

    def cycle(self) -> bool:
        """One pass of everything that happens without a client asking.
        Returns whether a job started or ended (then the next pass should come soon)."""
        now = time.time()
        busy_before = set(self.running)
        with self.store.transaction():  # one commit per pass, however many jobs changed
            self._annex_lifecycle(now)
            self._finish_output_transfers()
            self._monitor(now)
            self._periodic(now)
            if self.negotiate_needed:
                self._start_local_jobs()
                self._negotiate()
        return set(self.running) != busy_before
