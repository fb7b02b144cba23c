# BudgetFormer Explorer — `make run` starts the app, `make test` runs the tests.
# Both create the virtual environment .venv and install everything on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PORT   ?= 8501
BENCH_CHECKPOINT ?= precomputed/checkpoints/bbc-budgetformer
BENCH_ARGS ?=

.PHONY: run test setup precompute bench lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch is pinned to the CPU build that lies on this machine's disk
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev]"
	# tests/app/test_browser.py drives Debian's chromium through the playwright package
	# (never `playwright install`: nothing is downloaded outside the package managers)
	test -x /usr/bin/chromium || ! command -v apt-get >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) || \
		echo "WARNING: could not install chromium; the browser test will be skipped"
	touch $@

setup: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/streamlit run app/main.py --server.headless true --server.port $(PORT) \
		--browser.gatherUsageStats false

test: $(STAMP)
	$(VENV)/bin/pytest

# Rebuild the shipped checkpoints (BBC: dense and BudgetFormer).
precompute: $(STAMP)
	$(VENV)/bin/budgetformer train --dataset bbc --variant dense --out precomputed/checkpoints/bbc-dense --quiet
	$(VENV)/bin/budgetformer train --dataset bbc --variant budgetformer --out precomputed/checkpoints/bbc-budgetformer --quiet

# Measured single-thread CPU speed-up per budget vs the FLOP ideal (a Markdown table; add
# BENCH_ARGS="--json" for JSON, or e.g. BENCH_ARGS="--batch-size 32 --repeats 10").
bench: $(STAMP)
	$(VENV)/bin/budgetformer bench --checkpoint $(BENCH_CHECKPOINT) $(BENCH_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check budgetformer_core app tests

clean:
	rm -rf $(VENV) .pytest_cache
