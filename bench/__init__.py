"""htcannex benchmarks: `python -m bench` (all) or `python -m bench --only NAME`."""
