# poisonwatch developer entry points. `make demo` and `make test` are the README's Quick start.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-stamp

.PHONY: setup demo test lint clean

# Creates .venv and installs the package (editable) with every pinned dependency, once per
# change of pyproject.toml.
$(STAMP): pyproject.toml
	@command -v java >/dev/null || { echo "poisonwatch needs Java 17+ (e.g. apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(VENV)/bin/poisonwatch demo

test: setup
	bash scripts/test.sh

lint: setup
	$(VENV)/bin/ruff check python
	$(VENV)/bin/ruff format --check python

clean:
	rm -rf .poisonwatch target logs
