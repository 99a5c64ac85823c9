# `make demo` and `make test` are all the set-up a fresh clone needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# what `make demo` passes to `ptlint verify`
VERIFY ?= --device auto
# test workers (pytest-xdist): one per core; `make test JOBS=0` runs them in one process
JOBS ?= auto

.PHONY: demo test install docs clean

$(STAMP): pyproject.toml setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py $(VERIFY)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(JOBS) --dist loadgroup

docs: $(STAMP)
	$(BIN)/python -m ptlint.docs

clean:
	rm -rf $(VENV) .ptlint_cache .pytest_cache build dist *.egg-info
