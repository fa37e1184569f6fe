# The two commands of the README. Each creates .venv on first use and reinstalls
# when pyproject.toml changes, so a fresh clone needs nothing done by hand.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test test-fast bench clean

$(INSTALLED): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch==2.13.0 is pinned in the train extra: pip takes the CPU build from local disk.
	$(BIN)/python -m pip install -q -e '.[train,test]'
	touch $@

demo: $(INSTALLED)
	$(BIN)/python -m snakemake_executor_plugin_htcannex.demo

# One pytest worker per CPU (pytest-xdist): most of a test's time is Snakemake and the pool's
# daemon waiting on each other, so two workers on two cores roughly halve the wall time.
test: $(INSTALLED)
	$(BIN)/python -m pytest -q -n auto --durations=15

test-fast: $(INSTALLED)
	$(BIN)/python -m pytest -q -m "not slow"

bench: $(INSTALLED)
	$(BIN)/python -m bench

clean:
	rm -rf .htcannex .snakemake
