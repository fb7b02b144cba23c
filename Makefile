# BudgetFormer Explorer — `make run` starts the app, `make test` runs the tests.
# Both create the virtual environment .venv and install everything on first use.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PORT   ?= 8501

.PHONY: run test setup precompute lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch is pinned to the CPU build that lies on this machine's disk
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev]"
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

lint: $(STAMP)
	$(VENV)/bin/ruff check budgetformer_core app tests

clean:
	rm -rf $(VENV) .pytest_cache
