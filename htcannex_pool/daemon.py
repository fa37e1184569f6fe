"""The pool daemon: serves clients on a Unix socket and runs the scheduler's cycle.

One daemon per spool directory (an exclusive lock on `daemon.lock`, held for
the daemon's life). It detaches from whoever started it (double fork, new
session), so killing snakemake does not kill the pool or its jobs. It is the
only writer of the queue. It exits by itself after `idle_exit_s` with no jobs
that can still change and no requests, so nothing is left behind by CI.

Run as `python -m htcannex_pool.daemon --spool DIR ...`
(the client does this; see `Pool.ensure_running`).
"""
import argparse
import fcntl
import inspect
import json
import logging
import os
import signal
import socketserver
import sys
import threading
import time
from pathlib import Path

from . import local_universe, protocol
from .protocol import RequestError
from .scheduler import Scheduler

log = logging.getLogger("htcannex.pool")
# Requests that only look: they do not keep an idle daemon alive (a status poll
# in a loop would otherwise stop it from ever exiting).
OBSERVING_OPERATIONS = {"ping", "status"}
# Right after jobs start or end the scheduler looks again in BUSY_PAUSE_S (short jobs
# finish fast), then ever less often, up to the daemon's cycle.
BUSY_PAUSE_S = 0.01


class _ConnectionHandler(socketserver.StreamRequestHandler):
    """Answers each request line of one client connection, in order."""

    def handle(self):
        for line in self.rfile:
            self.wfile.write(protocol.encode(self.server.pool_daemon.answer(line)))
            self.wfile.flush()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class PoolDaemon:
    def __init__(self, spool: Path, origin: Path, idle_exit_s: float, cycle_s: float, slots: list[dict]):
        self.spool, self.idle_exit_s, self.cycle_s = spool, idle_exit_s, cycle_s
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        # Set by every request that may change the queue and by every job process that
        # exits: a submitted job is matched, and an ended one reaped, at once rather than
        # at the next cycle.
        self.wake = threading.Event()
        self.scheduler = Scheduler(spool, origin, slots, on_job_exit=self.wake.set)
        self.closed = False  # the scheduler is shut down; requests get a "stopping" answer
        self.last_request = time.time()
        self.operations = {
            "ping": lambda: {"pid": os.getpid()},
            "status": lambda: {"pid": os.getpid(), **self.scheduler.schedd.status()},
            "shutdown": self.stop,
            # Like every request that is not only observing, it wakes the scheduler: a match cycle now.
            "reschedule": lambda: None,
            **self.scheduler.operations(),
        }

    def answer(self, line: bytes) -> dict:
        """One request -> one answer; a bad request only ever fails that request."""
        try:
            request = protocol.decode(line)
            operation = self.operations.get(request.get("op"))
            if operation is None:
                raise RequestError(f"unknown operation {request.get('op')!r} "
                                   f"(known: {', '.join(sorted(self.operations))})")
            arguments = request.get("args") or {}
            if not isinstance(arguments, dict):
                raise RequestError("the request's args must be a JSON object")
            try:
                inspect.signature(operation).bind(**arguments)
            except TypeError as error:
                raise RequestError(f"bad arguments for {request['op']}: {error}") from None
            with self.lock:
                if self.closed:
                    return {"ok": False, "kind": "stopping", "error": "the pool daemon is shutting down"}
                if request["op"] not in OBSERVING_OPERATIONS:
                    self.last_request = time.time()
                result = operation(**arguments)
            if request["op"] not in OBSERVING_OPERATIONS:
                self.wake.set()
            return {"ok": True, "result": result}
        except (RequestError, ValueError) as error:
            return {"ok": False, "kind": "request", "error": str(error)}
        except Exception as error:  # never let one request take the daemon down
            log.exception("request failed")
            return {"ok": False, "kind": "internal", "error": f"{type(error).__name__}: {error}"}

    def stop(self):
        self.stopping.set()
        self.wake.set()

    def _idle_too_long(self) -> bool:
        return (time.time() - self.last_request > self.idle_exit_s
                and not self.scheduler.schedd.has_work())

    def serve(self, socket_path: Path):
        # Written before the first answer: a client that is answered finds who answers it.
        (self.spool / protocol.PID_NAME).write_text(f"{os.getpid()}\n")
        server = _Server(str(socket_path), _ConnectionHandler)
        server.pool_daemon = self
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         name="pool-server", daemon=True).start()
        log.info("serving %s", socket_path)
        pause = self.cycle_s
        while True:
            self.wake.wait(pause)
            self.wake.clear()
            if self.stopping.is_set():
                break
            with self.lock:
                try:
                    pause = BUSY_PAUSE_S if self.scheduler.cycle(time.time()) else min(2 * pause, self.cycle_s)
                except Exception:
                    log.exception("scheduler cycle failed")
                if self._idle_too_long():
                    log.info("idle for %s s: exiting", self.idle_exit_s)
                    break
        with self.lock:
            ending = self.scheduler.schedd.signal_local_shutdown()
        # Answering still, as a schedd does while its local jobs end: one may use it meanwhile
        # (a Snakemake told to stop removes its jobs). shutdown() kills what is left.
        while any(not local_universe.has_exited(job) and time.time() < kill_at for job, kill_at in ending):
            time.sleep(0.05)
        server.shutdown()
        with self.lock:
            self.scheduler.schedd.shutdown()
            self.closed = True
        socket_path.unlink(missing_ok=True)
        (self.spool / protocol.PID_NAME).unlink(missing_ok=True)
        log.info("stopped")


def _detach():
    """Double fork into a new session, so the daemon outlives and ignores its starter."""
    if os.fork():
        os._exit(0)
    os.setsid()
    if os.fork():
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The htcannex embedded pool daemon.")
    parser.add_argument("--spool", required=True, type=Path)
    parser.add_argument("--origin", required=True, type=Path)
    parser.add_argument("--idle-exit", type=float, default=1800.0)
    parser.add_argument("--cycle", type=float, default=0.1)
    parser.add_argument("--slots", type=json.loads, required=True, help="JSON list of ordinary slots")
    parser.add_argument("--detach", action="store_true")
    args = parser.parse_args(argv)
    if args.detach:
        _detach()
    spool = args.spool.resolve()
    logging.basicConfig(filename=spool / "daemon.log", level=logging.INFO,
                        format="%(asctime)s %(process)d %(levelname)s %(message)s")
    lock_file = open(spool / "daemon.lock", "w")
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.info("another daemon serves %s; exiting", spool)
        return 0
    args.origin.mkdir(parents=True, exist_ok=True)
    socket_path = spool / protocol.SOCKET_NAME
    socket_path.unlink(missing_ok=True)  # left by a daemon that died; we hold the lock now
    daemon = PoolDaemon(spool, args.origin.resolve(), args.idle_exit, args.cycle, args.slots)
    signal.signal(signal.SIGTERM, lambda *_: daemon.stop())
    # HTCondor starts jobs with default signal dispositions. A daemon started from a background
    # shell (CI, nohup) inherits SIGINT and SIGQUIT ignored, exec would hand that to every job,
    # and a shell cannot trap an ignored signal: remove_kill_sig = SIGINT (htcannex stop) would
    # never reach a driver. Handled here, they are reset to the default in each exec'd job.
    for number in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(number, signal.default_int_handler)
    daemon.serve(socket_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
