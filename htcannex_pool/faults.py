"""Fault injection, for tests only: an annex that expires now, an input transfer that fails, an
execute node that crashes. Not part of the pool's client API (the plugin never uses it).

Tests call the functions at the top with a `Pool`; the daemon serves them through `Injector`.
"""
import re

from htcondor_codes import HoldCode

from .protocol import RequestError
from .schedd import Schedd, key_of
from .transfer import TransferError


def expire_annex(pool, name: str) -> None:
    """The annex reaches the end of its lifetime now: its jobs are evicted and its slots go."""
    pool.request("inject_expire_annex", name=name)


def fail_next_transfer(pool) -> None:
    """The next job's input transfer fails: the job is held with 13/110 (TransferInputError)."""
    pool.request("inject_fail_next_transfer")


def kill_job(pool, job_id: str) -> None:
    """The running job's execute node crashes: the process dies and the job is evicted to idle."""
    pool.request("inject_kill_job", job_id=job_id)


class Injector:
    """The daemon's side: the requests above, and the transfer failure they arm."""

    def __init__(self, schedd: Schedd):
        self.schedd = schedd
        self._fail_next_transfer = False

    def operations(self) -> dict:
        return {"inject_expire_annex": self.expire_annex, "inject_fail_next_transfer": self.fail_next_transfer,
                "inject_kill_job": self.kill_job}

    def expire_annex(self, name: str):
        annexes = self.schedd.annexes
        annexes.expire(annexes.named(name))

    def fail_next_transfer(self):
        self._fail_next_transfer = True

    def kill_job(self, job_id: str):
        if not re.fullmatch(r"\d+\.\d+", str(job_id)):
            raise RequestError(f"inject_kill_job: {job_id!r} is not a job id (give C.P, e.g. 12.0)")
        [ad] = self.schedd.select(str(job_id))
        if key_of(ad) not in self.schedd.running:
            raise RequestError(f"inject_kill_job: job {job_id} is not running")
        self.schedd.evict(ad, "the execute node crashed (injected fault)")

    def input_transfer(self, job_id: str) -> None:
        """Called as a job's input transfer starts: raises the armed failure once."""
        if self._fail_next_transfer:
            self._fail_next_transfer = False
            raise TransferError(HoldCode.TransferInputError, 110,
                                f"Transfer input files failure (injected fault) for job {job_id}")
