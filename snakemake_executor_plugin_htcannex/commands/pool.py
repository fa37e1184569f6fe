"""`htcannex pool start|stop|status`: the embedded pool's daemon."""
import json

from htcannex_pool import Pool

from snakemake_executor_plugin_htcannex.commands._common import POOL_DIR_HELP, UsageError, add_verbs


def _pool(args) -> Pool:
    return Pool(args.spool, idle_exit_s=args.idle_exit)


def _start(args) -> int:
    pool = _pool(args)
    try:
        pool.ensure_running()
    except OSError as error:
        raise UsageError(f"cannot use {pool.spool_dir} as the pool's spool: {error.strerror}. Give a "
                         "directory you can write with --spool (or $HTCANNEX_POOL_DIR)") from error
    print(f"pool running (pid {pool.status()['pid']}), spool {pool.spool_dir}")
    return 0


def _stop(args) -> int:
    pool = _pool(args)
    pool.stop()
    print(f"pool at {pool.spool_dir} stopped")
    return 0


def _status(args) -> int:
    status = _pool(args).status()
    print(json.dumps(status, indent=2))
    return 0 if status["running"] else 3


def register(subparsers) -> None:
    verbs = add_verbs(subparsers, "pool", "start, stop or inspect the embedded HTCondor pool", (
        ("start", _start, "start the pool daemon (no-op if running)"),
        ("stop", _stop, "stop the daemon; running jobs go back to idle"),
        ("status", _status, "print the daemon's state as JSON (exit 3 if down)"),
    ))
    for verb in verbs.values():
        verb.add_argument("--spool", default=None,
                          help=POOL_DIR_HELP)
        verb.add_argument("--idle-exit", type=float, default=1800.0,
                          help="seconds without jobs or requests after which the daemon exits")
