"""Run the benchmarks: `python -m bench` runs all of them, `--only NAME` one (or several).

Each prints its numbers side by side from one run, with the machine and its load;
docs/benchmarks.md records the results and what each goal measures.
"""
import argparse
import time

from . import chunking, chunking_e2e, hop, overhead, scale, tracking_cost

BENCHMARKS = {
    "overhead": overhead,
    "tracking": tracking_cost,
    "scale": scale,
    "chunking": chunking,
    "chunking-e2e": chunking_e2e,
    "hop": hop,
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(BENCHMARKS), metavar="NAME",
                        help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}")
    parser.add_argument("--repeat", type=int, default=3, metavar="R",
                        help="measure each variant R times and report the median (default 3)")
    for module in BENCHMARKS.values():
        module.add_arguments(parser)
    args = parser.parse_args(argv)
    for name in args.only or BENCHMARKS:
        started = time.perf_counter()
        BENCHMARKS[name].run(args)
        print(f"   ({name} took {time.perf_counter() - started:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
