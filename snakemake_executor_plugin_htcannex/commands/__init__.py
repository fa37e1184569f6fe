"""One module per `htcannex` noun; see `cli.py`."""
