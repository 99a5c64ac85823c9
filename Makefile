# `make demo` and `make test` are all the set-up a fresh clone needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install docs clean

$(STAMP): pyproject.toml setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@echo "== ptlint on the bundled fixtures (findings expected: they are the rules' bad examples)"
	-$(BIN)/ptlint check fixtures/ --no-cache --statistics
	-$(BIN)/ptlint check fixtures/PTL001_loss_kept_with_graph/bad.py --no-cache
	@echo "== runtime companion: each rule's bad vs fixed program (check, time, peak memory)"
	$(BIN)/ptlint verify --device auto

test: $(STAMP)
	$(BIN)/python -m pytest -q

docs: $(STAMP)
	$(BIN)/python -m ptlint.docs

clean:
	rm -rf $(VENV) .ptlint_cache .pytest_cache build dist *.egg-info
