"""The client side of the embedded pool: `Pool`, and the schedd and collector it offers.

`PoolSchedd` and `PoolCollector` take the same calls as `htcondor2.Schedd` and
`htcondor2.Collector` (the subset in docs/architecture.md), so the plugin
drives a real access point and this pool with the same code. Every call is one
request to the daemon; if the daemon is not up (never started, or exited when
idle), the call starts it first.

Each thread keeps one connection to the daemon open and sends its requests over it, one
line each (the daemon answers a connection's lines in order): a submit costs one round
trip, not a connect, a new daemon thread and a round trip.
"""
import fcntl
import functools
import getpass
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import classad2
import htcondor2
import psutil
from htcondor_codes import param_seconds

from . import protocol
from .policy import PolicyConfigError, PoolPolicy
from .transfer import PLUGIN_METHODS

DEFAULT_SPOOL = Path(".htcannex/pool")
RESPAWN_AFTER_S = 3.0
# How long a request waits for the daemon's answer: HTCondor's QUERY_TIMEOUT, read as HTCondor's tools read
# it (60 s unless a condor_config or _CONDOR_QUERY_TIMEOUT says otherwise). A daemon that is stuck (or
# stopped) is then an error that says so, never a client blocked for good.
ANSWER_TIMEOUT_S = param_seconds("QUERY_TIMEOUT")

log = logging.getLogger(__name__)


class PoolError(htcondor2.HTCondorException):
    """The pool could not do what was asked (the message says why)."""


class PoolRequestError(PoolError, ValueError):
    """The request itself was bad: a rejected submit, an unknown job, a malformed constraint."""


def default_slots() -> list[dict]:
    """One ordinary slot with the machine's cores and memory."""
    return [{"cpus": os.cpu_count() or 1, "memory_mb": psutil.virtual_memory().total // 2**20}]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _checked_slots(slots) -> list[dict]:
    """Ordinary slot shapes, refused here with the fix rather than by a daemon that fails to start."""
    for index, slot in enumerate(slots):
        for key in ("cpus", "memory_mb"):
            value = slot.get(key) if isinstance(slot, dict) else None
            if not isinstance(value, int) or value <= 0:
                raise PoolRequestError(f"Pool(slots=...): slot {index} needs {key} as a positive integer, "
                                       f"got {value!r} (e.g. {{'cpus': 2, 'memory_mb': 4096}})")
        if not isinstance(slot.get("transfer_methods", ""), str):
            raise PoolRequestError(f"Pool(slots=...): slot {index}'s transfer_methods must be a string of URL "
                                   f"methods, got {slot['transfer_methods']!r} (e.g. 'osdf,https')")
        if not isinstance(slot.get("containers", False), bool):
            raise PoolRequestError(f"Pool(slots=...): slot {index}'s containers must be true or false (whether it "
                                   f"declares a container runtime), got {slot['containers']!r}")
    return list(slots)


@functools.cache
def _user() -> str:
    """The submitting user, the Owner of every job this process submits (asked once)."""
    return getpass.getuser()


def _connect(socket_path: Path) -> socket.socket:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(ANSWER_TIMEOUT_S)
    try:
        connection.connect(str(socket_path))
    except OSError:
        connection.close()
        raise
    return connection


class _Connection:
    """One open connection to the daemon, for the thread (and process) that opened it."""

    def __init__(self, connected: socket.socket):
        self.pid = os.getpid()
        self.socket = connected
        self.answers = connected.makefile("rb")

    def exchange(self, request: bytes) -> bytes:
        self.socket.sendall(request)
        line = self.answers.readline()
        if not line:
            raise ConnectionResetError("the pool daemon closed the connection")
        return line

    def close(self):
        self.answers.close()
        self.socket.close()

    __del__ = close  # a Pool dropped with its threads' connections open closes them


class Pool:
    def __init__(self, spool_dir: str | os.PathLike | None = None, *, idle_exit_s: float = 1800.0,
                 cycle_s: float = 0.1, slots: list[dict] | None = None,
                 origin_dir: str | os.PathLike | None = None, start_timeout_s: float = 30.0,
                 config: dict | None = None):
        """`config`: the pool's policies by HTCondor macro name (pool/policy.py), saved in the spool
        for every daemon that serves it; None keeps what the spool has (default: cgroup limits)."""
        spool = spool_dir or os.environ.get("HTCANNEX_POOL_DIR") or DEFAULT_SPOOL
        self.spool_dir = Path(spool).resolve()
        self.origin_dir = Path(origin_dir).resolve() if origin_dir else self.spool_dir / "osdf-origin"
        self.idle_exit_s, self.cycle_s = idle_exit_s, cycle_s
        self.slots = _checked_slots(slots) if slots is not None else default_slots()
        self.start_timeout_s = start_timeout_s
        if config is not None:
            try:
                self.spool_dir.mkdir(parents=True, exist_ok=True)
                PoolPolicy.save(self.spool_dir, config)
            except PolicyConfigError as error:
                raise PoolRequestError(str(error)) from None
        self.socket_path = self.spool_dir / protocol.SOCKET_NAME
        self._connections = threading.local()
        if len(str(self.socket_path)) > protocol.MAX_SOCKET_PATH:
            raise PoolError(f"pool spool directory {self.spool_dir} is too deep for a Unix socket "
                            f"({len(str(self.socket_path))} > {protocol.MAX_SOCKET_PATH} characters); "
                            "choose a shorter HTCANNEX_POOL_DIR")

    # ---- talking to the daemon

    def _send(self, op: str, args: dict) -> dict:
        """One request over this thread's connection, opened on first use. A connection that
        fails is dropped (its daemon has exited); the next request opens a new one."""
        connection = getattr(self._connections, "open", None)
        if connection is None or connection.pid != os.getpid():  # none yet, or the parent's before a fork
            connection = self._connections.open = _Connection(_connect(self.socket_path))
        try:
            line = connection.exchange(protocol.encode({"op": op, "args": args}))
        except OSError:
            self._disconnect()
            raise
        return protocol.decode(line)

    def _disconnect(self):
        connection = getattr(self._connections, "open", None)
        if connection is not None:
            connection.close()
            self._connections.open = None

    def request(self, op: str, *, start: bool = True, **args):
        """One request; starts the daemon first if it is not up (or just exiting) and `start` is set."""
        try:
            answer = self._send(op, args)
        except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, BrokenPipeError):
            # This thread's kept connection led to a daemon that has exited; another may serve now
            # (a client restarted it): ask once more on a new connection before saying none does.
            answer = self._answer_on_a_new_connection(op, args)
        except TimeoutError:
            raise self._stuck() from None
        if answer is None or answer.get("kind") == "stopping":
            self._disconnect()  # a stopping daemon's connection leads nowhere once it has exited
            if not start:
                raise PoolError(f"the pool at {self.spool_dir} is not running "
                                "(start it with `htcannex pool start` or Pool.ensure_running())")
            self._say_if_it_died()
            self.ensure_running()
            try:
                answer = self._send(op, args)
            except TimeoutError:
                raise self._stuck() from None
        if answer["ok"]:
            return answer["result"]
        if answer.get("kind") == "request":
            raise PoolRequestError(answer["error"])
        raise PoolError(f"pool daemon error (see {self.spool_dir / 'daemon.log'}): {answer['error']}")

    def _answer_on_a_new_connection(self, op: str, args: dict) -> dict | None:
        try:
            return self._send(op, args)
        except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError, BrokenPipeError):
            return None
        except TimeoutError:
            raise self._stuck() from None

    def recorded_pid(self) -> int | None:
        """The pid the serving daemon wrote into the spool, if any."""
        try:
            return int((self.spool_dir / protocol.PID_NAME).read_text())
        except (OSError, ValueError):
            return None

    def _stuck(self) -> PoolError:
        pid = self.recorded_pid() or "?"
        return PoolError(f"the pool daemon (pid {pid}) serving {self.spool_dir} did not answer within "
                         f"{ANSWER_TIMEOUT_S:g} s: it is stuck or stopped (see {self.spool_dir / 'daemon.log'}). "
                         f"`kill -CONT {pid}` resumes a stopped one; `kill -9 {pid}` ends a stuck one, and the next "
                         "request starts a new daemon: the queue survives, and jobs that were running run again")

    def _say_if_it_died(self) -> None:
        """A daemon that ended without shutting down (killed, crashed) left its pid file: say so
        before a new one is started, since every job it was running starts again."""
        pid = self.recorded_pid()
        if pid is not None and not _alive(pid):
            log.warning(f"htcannex: the embedded pool's daemon (pid {pid}, spool {self.spool_dir}) ended without "
                        "shutting down (killed or crashed); starting a new one: the queue survives, and jobs that "
                        f"were running run again from the start (see {self.spool_dir / 'daemon.log'})")

    def _answers_ping(self) -> bool:
        """Whether a daemon serves this spool; one that is there and does not answer in time (stopped,
        stuck) is an error that says so: no new daemon can start while it holds the spool."""
        try:
            return self._send("ping", {})["ok"]
        except TimeoutError:
            raise self._stuck() from None
        except OSError:
            return False

    def ensure_running(self):
        """Start the daemon unless one serves this spool; safe to call from many clients at once."""
        self.spool_dir.mkdir(parents=True, exist_ok=True)
        with open(self.spool_dir / "start.lock", "w") as start_lock:
            fcntl.flock(start_lock, fcntl.LOCK_EX)
            if self._answers_ping():
                return
            deadline = time.time() + self.start_timeout_s
            while True:
                # A daemon that is just exiting still holds daemon.lock, and the one started
                # here then gives way at once; so start again until one answers.
                self._spawn_daemon()
                started = time.time()
                while time.time() - started < RESPAWN_AFTER_S:
                    if self._answers_ping():
                        return
                    time.sleep(0.05)
                if time.time() > deadline:
                    raise PoolError(f"the pool daemon did not start within {self.start_timeout_s} s; "
                                    f"see {self.spool_dir / 'daemon.log'}")

    def _spawn_daemon(self):
        with open(self.spool_dir / "daemon.log", "ab") as daemon_log:
            # The daemon double-forks; this child exits at once after detaching.
            subprocess.run(
                [sys.executable, "-m", "htcannex_pool.daemon",
                 "--spool", str(self.spool_dir), "--origin", str(self.origin_dir),
                 "--idle-exit", str(self.idle_exit_s), "--cycle", str(self.cycle_s),
                 "--slots", json.dumps(self.slots), "--detach"],
                stdin=subprocess.DEVNULL, stdout=daemon_log, stderr=daemon_log, check=True)

    def status(self) -> dict:
        try:
            return {"running": True, **self.request("status", start=False)}
        except PoolError:
            return {"running": False, "pid": None, "jobs": {}, "annexes": [], "origin": str(self.origin_dir)}

    def stop(self, timeout_s: float = 30.0):
        """Stop the daemon (running jobs are evicted; the queue stays for the next start)."""
        try:
            pid = self.request("ping", start=False)["pid"]
            self.request("shutdown", start=False)
        except PoolError:
            return  # not running (or already on its way out)
        deadline = time.time() + timeout_s
        while _alive(pid):
            if time.time() > deadline:
                raise PoolError(f"the pool daemon (pid {pid}) did not stop within {timeout_s} s")
            time.sleep(0.05)

    def schedd(self) -> "PoolSchedd":
        return PoolSchedd(self)

    def collector(self) -> "PoolCollector":
        return PoolCollector(self)

    # ---- annexes

    def create_annex(self, name: str, *, owner: str, nodes: int = 1, cpus: int, memory_mb: int,
                     gpus: int = 0, gpu_memory_mb: int = 0, gpu_capability: float = 0.0,
                     lifetime_s: float, startup_delay_s: float = 0.0, comes_up: bool = True,
                     transfer_methods: str = PLUGIN_METHODS, containers: bool = False, cgroups: bool = False) -> None:
        """An annex of `nodes` slots; `transfer_methods` are the URL methods its starters' plugins serve
        (HasFileTransferPluginMethods; "" for an execute point without plugins); `containers`, whether its
        slots declare a container runtime (HasContainer and the image kinds; for tests of the container submit
        path: the pool runs no image, and holds a container job that reaches such a slot); `cgroups`, whether its
        jobs get per-job cgroups (an annex's pilot runs unprivileged and makes none: slots.Annex.cgroups)."""
        self.request("create_annex", spec={
            "name": name, "owner": owner, "nodes": nodes, "cpus": cpus, "memory_mb": memory_mb,
            "gpus": gpus, "gpu_memory_mb": gpu_memory_mb, "gpu_capability": gpu_capability,
            "lifetime_s": lifetime_s, "startup_delay_s": startup_delay_s, "comes_up": comes_up,
            "transfer_methods": transfer_methods, "containers": containers, "cgroups": cgroups})

    def remove_annex(self, name: str) -> None:
        self.request("remove_annex", name=name)

    def annexes(self) -> list[dict]:
        return self.request("annexes")


class SubmitResult:
    """What `htcondor2.Schedd.submit` returns, for the calls the plugin uses."""

    def __init__(self, cluster: int, first_proc: int, num_procs: int):
        self._cluster, self._first_proc, self._num_procs = cluster, first_proc, num_procs

    def cluster(self) -> int:
        return self._cluster

    def first_proc(self) -> int:
        return self._first_proc

    def num_procs(self) -> int:
        return self._num_procs

    def __int__(self) -> int:
        return self._cluster

    def __repr__(self) -> str:
        return (f"SubmitResult(cluster={self._cluster}, first_proc={self._first_proc}, "
                f"num_procs={self._num_procs})")


_DEFAULT_ITEMDATA = object()


def _procs(description: htcondor2.Submit, count: int, itemdata, queue: str | None) -> list[dict]:
    """Queue variables for each proc, as `queue [N] [vars from ...]` would give them."""
    if queue is not None:
        queue_args = queue[6:] if queue.lower().startswith("queue ") else queue
        items = description.itemdata(queue_args)
    elif itemdata is _DEFAULT_ITEMDATA:
        queue_args = description.getQArgs()
        items = description.itemdata()
    else:
        queue_args = ""
        items = None if itemdata is None else [
            item if isinstance(item, dict) else {"Item": str(item).strip()} for item in itemdata]
    leading = re.match(r"\s*(\d+)", queue_args or "")
    per_item = count or (int(leading.group(1)) if leading else 1)
    rows = [{}] if items is None else list(items)
    return [{**variables, "Step": str(step), "Row": str(row)}
            for row, variables in enumerate(rows) for step in range(per_item)]


def _spec(job_spec) -> str | list[str]:
    if isinstance(job_spec, list):
        return [str(item) for item in job_spec]
    return str(job_spec)


def _ads(texts: list[str]) -> list[classad2.ClassAd]:
    return [classad2.parseOne(text) for text in texts]


class PoolSchedd:
    """`htcondor2.Schedd`'s calls, served by the embedded pool."""

    def __init__(self, pool: Pool):
        self._pool = pool

    def submit(self, description: htcondor2.Submit, count: int = 0, spool: bool = False,
               itemdata=_DEFAULT_ITEMDATA, queue: str | None = None) -> SubmitResult:
        if not isinstance(description, htcondor2.Submit):
            raise TypeError("description must be an htcondor2.Submit object")
        if queue is not None and (count or itemdata is not _DEFAULT_ITEMDATA):
            raise ValueError("queue and count/itemdata are mutually exclusive")
        items = dict(description.items())
        wants_environment = any(key.lower() == "getenv" for key in items)
        result = self._pool.request(
            "submit", items=items, procs=_procs(description, count, itemdata, queue),
            submit_dir=os.getcwd(), owner=_user(),
            environment=dict(os.environ) if wants_environment else None)
        return SubmitResult(result["cluster"], result["first_proc"], result["num_procs"])

    def act(self, action: htcondor2.JobAction, job_spec, reason: str | None = None) -> classad2.ClassAd:
        if not isinstance(action, htcondor2.JobAction):
            raise TypeError("action must be a JobAction")
        return classad2.ClassAd(self._pool.request("act", action=action.name, spec=_spec(job_spec),
                                                   reason=reason))

    def edit(self, job_spec, attr: str, value) -> int:
        value = repr(value) if isinstance(value, classad2.ExprTree) else str(value)
        return self._pool.request("edit", spec=_spec(job_spec), attribute=attr, value=value)

    def query(self, constraint="True", projection: list[str] = (), callback=None, limit: int = -1,
              opts=None) -> list:
        ads = _ads(self._pool.request("query", constraint=str(constraint), projection=list(projection)))
        if limit >= 0:
            ads = ads[:limit]
        if callback is not None:
            ads = [result for result in map(callback, ads) if result is not None]
        return ads

    def history(self, constraint=None, projection: list[str] = (), match: int = -1, since=None) -> list:
        return _ads(self._pool.request("history", constraint=None if constraint is None else str(constraint),
                                       projection=list(projection), match=match))

    def reschedule(self) -> None:
        """As a schedd's RESCHEDULE: queued jobs are matched now (the daemon matches after every request)."""
        self._pool.request("reschedule")


class PoolCollector:
    """`htcondor2.Collector.query` for slot (Startd) ads of the pool and its annexes."""

    def __init__(self, pool: Pool):
        self._pool = pool

    def query(self, ad_type=htcondor2.AdTypes.Startd, constraint="", projection: list[str] = ()) -> list:
        if ad_type not in (htcondor2.AdTypes.Startd, htcondor2.AdTypes.Slot, htcondor2.AdTypes.Any):
            raise PoolRequestError(f"the embedded pool's collector holds only slot ads "
                                   f"(AdTypes.Startd), not {ad_type}")
        return _ads(self._pool.request("slots", constraint=str(constraint), projection=list(projection)))
