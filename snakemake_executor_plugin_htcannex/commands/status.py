"""`htcannex status`: the live board of this working directory's run (see board.py)."""
import time
from pathlib import Path

import yaml

from snakemake_executor_plugin_htcannex import paths
from snakemake_executor_plugin_htcannex.ops.board import BoardSource, render
from snakemake_executor_plugin_htcannex.commands._common import UsageError, add_pool_options, open_catalogue_and_pool

CLEAR_SCREEN = "\x1b[H\x1b[2J"


def epochs_per_job_from_config(path: Path):
    """`epochs_per_job` anywhere in the workflow's config file, or None."""
    if not path.is_file():
        return None
    stack = [yaml.safe_load(path.read_text())]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("epochs_per_job"), int):
                return node["epochs_per_job"]
            stack.extend(node.values())
    return None


def status(args) -> int:
    workdir = Path(args.directory).resolve()
    if not paths.state_dir(workdir).is_dir():
        raise UsageError(f"{workdir} has no .htcannex directory: no htcannex run was started here "
                         "(run this in the directory you ran snakemake in, or pass --directory)")
    catalogue, connection = open_catalogue_and_pool(args)
    rotation = catalogue.rotation if catalogue else None
    source = BoardSource(
        workdir, connection.schedd, connection.collector,
        run_wildcard=rotation.run_wildcard if rotation else "run",
        chunk_wildcard=rotation.chunk_wildcard if rotation else "chunk",
        epochs_per_job=args.epochs_per_job or epochs_per_job_from_config(workdir / "config" / "config.yaml"),
        first_chunk=args.first_chunk,
    )
    try:
        while True:
            board = source.board()
            text = board.to_json() if args.json else render(board)
            print(text if args.once or args.json else CLEAR_SCREEN + text, flush=True)
            if args.once or args.json:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0
    finally:
        source.close()


def register(nouns) -> None:
    parser = nouns.add_parser("status", help="live board of runs x chunks and per-site epoch times")
    parser.add_argument("--directory", "-d", default=".", help="the run's working directory (default: here)")
    parser.add_argument("--once", action="store_true", help="print the board once instead of refreshing")
    parser.add_argument("--json", action="store_true", help="print the board once as JSON, for scripts")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes (default: 2)")
    parser.add_argument("--epochs-per-job", type=int,
                        help="epochs each chunk trains (default: epochs_per_job in config/config.yaml)")
    parser.add_argument("--first-chunk", type=int,
                        help="the chunk number that trains epoch 1 (default: each rule's lowest chunk in the "
                             "event log; protein_lm numbers chunks from 1)")
    add_pool_options(parser)
    parser.set_defaults(func=status)
