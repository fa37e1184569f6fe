"""The schedd's shadows and starters: a matched job's run starts on its slot (input transfer, the
process), ends (reaped, outputs back, the exit judged) or restarts in place at a checkpoint, and a
local-universe job runs on the access point. State changes go through the schedd (schedd.py).
"""
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import classad2
from htcondor_codes import CHECKPOINT_EXIT_CODE, WANT_FT_ON_CHECKPOINT, HoldCode, JobStatus

from . import dollardollar, local_universe, memory, starter, transfer
from .eventlog import UserLog
from .exits import ExitWatch
from .faults import Injector
from .output_transfer import Outcome, OutputTransfers
from .schedd import Schedd, job_id, key_of
from .slots import Slot


class Shadows:
    def __init__(self, schedd: Schedd, origin: Path, memory_policy: memory.MemoryPolicy,
                 on_job_exit: Callable[[], None], faults: Injector):
        self.schedd, self.origin, self.memory_policy, self.faults = schedd, origin, memory_policy, faults
        self.checkpoint_dir = schedd.spool / "checkpoints"
        # `on_job_exit` is called from another thread as soon as a job's process exits or its
        # outputs are back.
        self.exit_watch = ExitWatch(on_job_exit)
        self.output_transfers = OutputTransfers(origin, on_job_exit)

    def reap(self) -> None:
        """Collect the runs whose process exited, and those whose outputs are back."""
        self._finish_output_transfers()
        for running in list(self.schedd.running.values()):
            if running.process.returncode is not None:
                continue  # exited already: its outputs are on their way back
            returncode = running.poll()
            if returncode is not None:
                self._exited(running, returncode)

    def _checkpoint_dir(self, key: tuple[int, int]) -> Path:
        return self.checkpoint_dir / job_id(key)

    def start(self, ad: classad2.ClassAd, slot: Slot):
        key = key_of(ad)
        ad["NumJobStarts"] += 1
        ad["JobRunCount"] += 1
        ad["NumShadowStarts"] += 1
        sandbox = self.schedd.execute_dir / f"dir_{key[0]}_{key[1]}_{ad['NumShadowStarts']}"
        log = UserLog(ad)
        try:
            # The schedd expands $$() against the slot before the shadow and starter see the job.
            job = dollardollar.expand(ad, slot.ad)
        except dollardollar.ExpansionError as error:
            self.schedd.hold(ad, str(error), HoldCode.Unspecified, 0)
            return
        try:
            received = 0
            if ad["ShouldTransferFiles"] == "YES":
                log.transfer("input", finished=False)
                self.faults.input_transfer(job_id(key))
                received = transfer.stage_in(job, sandbox, self.origin, self._checkpoint_dir(key))
                log.transfer("input", finished=True)
                before = transfer.snapshot(sandbox)
            else:
                sandbox.mkdir(parents=True)
                before = {}
            running = starter.launch(job, slot.ad, sandbox, before, self.exit_watch.watch)
        except transfer.TransferError as error:
            shutil.rmtree(sandbox, ignore_errors=True)
            self.schedd.hold(ad, str(error), error.code, error.subcode)
            return
        except OSError as error:
            self._hold_failed_start(ad, sandbox, slot.name, error)
            return
        now = int(time.time())
        running.bytes_received = received
        ad["BytesRecvd"] = ad.get("BytesRecvd", 0) + received
        annex = self.schedd.annexes.get(slot.ad.get("AnnexName"))
        running.memory = memory.for_slot(self.memory_policy, slot.ad, annex.cgroups if annex is not None else None)
        self.schedd.running[key] = running
        slot.job = key
        slot.ad.update({"State": "Claimed", "Activity": "Busy", "RemoteOwner": ad["Owner"],
                        "JobId": job_id(key)})
        if "JobStartDate" not in ad:
            ad["JobStartDate"] = now
        ad.update({"RemoteHost": slot.name, "JobCurrentStartDate": now,
                   "JobCurrentStartExecutingDate": now, "PoolProcessId": running.process.pid,
                   "PoolProcessCreateTime": running.create_time})
        # What the slot gives the job: the Allocated column of the event log's resources table.
        ad.update({f"{name}Provisioned": slot.ad[name] for name in ("Cpus", "Memory", "Disk", "GPUs")
                   if name in slot.ad})
        self.schedd.set_status(ad, JobStatus.RUNNING)
        log.executing(slot.ad, str(sandbox), ad.get("UserLogExecuteEventAttrs", ""))
        self.schedd.store.save(ad)

    def _hold_failed_start(self, ad: classad2.ClassAd, directory: Path, where: str, error: OSError):
        """The starter could not run the executable: held with code 6, the errno as subcode."""
        shutil.rmtree(directory, ignore_errors=True)
        self.schedd.hold(ad, f"Error from {where}: Failed to execute '{ad['Cmd']}': {error}",
                   HoldCode.FailedToCreateProcess, error.errno or 0)

    def start_local_jobs(self):
        for key, ad in list(self.schedd.jobs.items()):
            if ad["JobStatus"] == JobStatus.IDLE and local_universe.is_local(ad):
                self._start_local(ad)

    def _start_local(self, ad: classad2.ClassAd):
        key = key_of(ad)
        ad["NumJobStarts"] += 1
        scratch = self.schedd.spool / local_universe.SCRATCH_ROOT / f"dir_{key[0]}_{key[1]}_{ad['NumJobStarts']}"
        try:
            running = local_universe.launch(ad, scratch, self.exit_watch.watch)
        except OSError as error:
            self._hold_failed_start(ad, scratch, "starter on the access point", error)
            return
        now = int(time.time())
        self.schedd.running[key] = running
        if "JobStartDate" not in ad:
            ad["JobStartDate"] = now
        ad.update({"JobCurrentStartDate": now, "PoolProcessId": running.process.pid,
                   "PoolProcessCreateTime": running.create_time})
        self.schedd.set_status(ad, JobStatus.RUNNING)
        UserLog(ad).executing_locally()
        self.schedd.store.save(ad)

    def _exited_locally(self, ad: classad2.ClassAd, running: starter.RunningJob, returncode: int):
        starter.record_usage(ad, running)
        self.schedd.release_slot(running)  # its scratch directory; a local job holds no slot
        for attribute in ("PoolProcessId", "PoolProcessCreateTime"):
            if attribute in ad:
                del ad[attribute]
        log = UserLog(ad)
        if ad["JobStatus"] == JobStatus.REMOVED:
            log.evicted()  # the local starter logs an eviction for a removed job, then the schedd the abort
            self.schedd.finish_removal(ad)
            return
        if not local_universe.removed_on_exit(ad, returncode):
            log.requeued_after_exit(ad.get("ExitCode"), signal=ad.get("ExitSignal") if returncode < 0 else None)
            self.schedd.set_status(ad, JobStatus.IDLE)
            self.schedd.store.save(ad)
            self.schedd.negotiator.needed = True
            return
        log.terminated(ad.get("ExitCode"), signal=-returncode if returncode < 0 else None)
        ad["CompletionDate"] = int(time.time())
        self.schedd.set_status(ad, JobStatus.COMPLETED)
        self.schedd.retire(ad)

    def _exited(self, running: starter.RunningJob, returncode: int):
        key = running.key
        ad = self.schedd.jobs[key]
        if local_universe.is_local(ad):
            del self.schedd.running[key]
            self._exited_locally(ad, running, returncode)
            return
        starter.record_usage(ad, running)
        if ad.get(WANT_FT_ON_CHECKPOINT) is True and returncode == ad.get(CHECKPOINT_EXIT_CODE):
            self._restart_in_place(ad, running)
            return
        if ad["ShouldTransferFiles"] == "YES":
            # Still running on its slot until its outputs are back (output_transfer.py).
            UserLog(ad).transfer("output", finished=False)
            # Expanded from the MATCH_* values the start kept (the slot may be gone by now).
            self.output_transfers.send(dollardollar.expand(ad, None), running, self._succeeded(ad, returncode))
            return
        del self.schedd.running[key]
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
        slot = self.schedd.slot_named(running.slot_name)
        try:
            # Expanded from the MATCH_* values the start kept, as the first run's ad was.
            restarted = starter.launch(dollardollar.expand(ad, None), slot.ad, running.sandbox,
                                       running.inputs_before, self.exit_watch.watch)
        except OSError as error:  # the job removed or broke its own executable (the hold frees the slot)
            self._hold_failed_start(ad, running.sandbox, slot.name, error)
            return
        # One run, as the shadow sees it: its input bytes and the memory it has reported go on.
        restarted.bytes_received = running.bytes_received
        restarted.memory = running.memory
        self.schedd.running[key] = restarted
        ad.update({"PoolProcessId": restarted.process.pid, "PoolProcessCreateTime": restarted.create_time})
        self.schedd.store.save(ad)

    @staticmethod
    def _succeeded(ad: classad2.ClassAd, returncode: int) -> bool:
        return returncode == ad.get("JobSuccessExitCode", 0)

    def _finish_output_transfers(self):
        for running, outcome in self.output_transfers.finished():
            if self.schedd.running.get(running.key) is not running:
                continue  # removed, held or evicted while its outputs were on their way
            del self.schedd.running[running.key]
            self._ended(self.schedd.jobs[running.key], running, outcome)

    def _ended(self, ad: classad2.ClassAd, running: starter.RunningJob, outcome: Outcome):
        """A job's process has exited and its outputs are back (`outcome`: the bytes sent) or
        failed to come back (the TransferError, which holds the job)."""
        log = UserLog(ad)
        returncode = running.process.returncode
        if isinstance(outcome, transfer.TransferError):
            self.schedd.release_slot(running)
            self.schedd.hold(ad, str(outcome), outcome.code, outcome.subcode)
            return
        if ad["ShouldTransferFiles"] == "YES":
            log.transfer("output", finished=True)
        sent = outcome
        ad["BytesSent"] = ad.get("BytesSent", 0) + sent
        run_bytes = (sent, running.bytes_received)
        self.schedd.release_slot(running)
        ad["NumJobCompletions"] += 1
        if returncode < 0:
            ad.update({"ExitBySignal": True, "ExitSignal": -returncode})
            log.terminated(None, signal=-returncode, run_bytes=run_bytes)
        else:
            ad.update({"ExitBySignal": False, "ExitCode": returncode})
            retries = ad.get("JobMaxRetries")
            if not self._succeeded(ad, returncode) and retries is not None and ad["NumJobCompletions"] <= retries:
                log.requeued_after_exit(returncode, run_bytes)
                self.schedd.set_status(ad, JobStatus.IDLE)
                self.schedd.store.save(ad)
                return
            log.terminated(returncode, run_bytes=run_bytes)
        ad["CompletionDate"] = int(time.time())
        shutil.rmtree(self._checkpoint_dir(key_of(ad)), ignore_errors=True)
        self.schedd.set_status(ad, JobStatus.COMPLETED)
        self.schedd.retire(ad)
