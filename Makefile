# Entry points of the ai-models repository. `make test` and `make dev` install what they need.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install lint test render locks dev bench csi-sanity clean

install: $(STAMP)

# .venv/platform-site: the Deckhouse image's own packages for tests/hooks/test_bundle.py (D126),
# outside the venv's sys.path.
$(STAMP): tests/requirements.txt tests/platform-requirements.txt images/ai-models/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e images/ai-models
	rm -rf $(VENV)/platform-site
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
		--target $(VENV)/platform-site -r tests/platform-requirements.txt
	touch $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest -n 3 --dist loadfile -m "not serial"
	$(BIN)/pytest -m serial

render: install
	PYTHONPATH=tests $(BIN)/python -m support.render_cli --out out

# Rewrite the hash-locked requirement files the werf build installs from the pins (asks PyPI for the
# hashes): after changing a pin in tests/requirements.txt, lib/python/requirements.txt or pyproject.
locks: install
	PYTHONPATH=tests $(BIN)/python -m support.locks

# Benchmarks print figures and ratios measured in one run; each exits non-zero on a missed target.
bench: install
	@status=0; for module in $$(cd tests && ls bench/bench_*.py | sed 's|/|.|; s|\.py$$||'); do \
		echo "== $$module"; PYTHONPATH=tests $(BIN)/python -m $$module || status=1; \
	done; exit $$status

# The CSI conformance suite against the node plugin (as root: it mounts); the binary is not in the
# repository: make csi-sanity CSI_SANITY=/path/to/csi-sanity
csi-sanity: install
	PYTHONPATH=tests $(BIN)/python -m csi.sanity $(or $(CSI_SANITY),$(error set CSI_SANITY to the csi-sanity binary))

# A restart keeps the cluster's objects and artifacts in .dev/; `make dev FRESH=1` starts empty.
dev: install
	PYTHONPATH=tests $(if $(filter-out 0,$(FRESH)),AI_MODELS_DEV_FRESH=1 )$(BIN)/python -m testbed.devstack

clean:
	rm -rf $(VENV) .dev out
