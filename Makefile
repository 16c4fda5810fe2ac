# poisonwatch developer entry points. `make demo` and `make test` are the README's Quick start.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-stamp
KIT_JAR := java/target/poisonwatch-jms-kit-0.1.0.jar

.PHONY: setup demo test lint clean

# Creates .venv, installs the package (editable) with every pinned dependency and writes the
# class archive, once per change of pyproject.toml or of the archive's builder.
$(STAMP): pyproject.toml python/poisonwatch/warehouse/class_archive.py python/poisonwatch/warehouse/jars.py python/poisonwatch/broker/artemis_dist.py
	@command -v java >/dev/null || { echo "poisonwatch needs Java 17+ (e.g. apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
	@command -v mvn >/dev/null || { echo "poisonwatch needs Maven to fetch Delta Lake's jars (e.g. apt-get install maven)" >&2; exit 1; }
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	@# Delta Lake's jars, pinned in pyproject.toml, from Maven Central (needs mvn).
	$(VENV)/bin/python -m poisonwatch.warehouse.jars
	@# The ActiveMQ Artemis distribution the broker tests start, pinned likewise (needs mvn).
	$(VENV)/bin/python -m poisonwatch.broker.artemis_dist
	@# Spark's classes as a JVM class-data-sharing archive, which every later Spark start maps
	@# instead of loading them. Without it Spark starts the usual way, so a failure here only
	@# warns.
	$(VENV)/bin/python -m poisonwatch.warehouse.class_archive || true
	touch $(STAMP)

# The Java consumer kit (seed 002's JMS agents); its tests run in `make test`.
$(KIT_JAR): java/pom.xml $(shell find java/src/main -name '*.java')
	mvn -q -B -Dstyle.color=never -f java/pom.xml package -DskipTests

setup: $(STAMP) $(KIT_JAR)

demo: setup
	$(VENV)/bin/poisonwatch demo

test: setup
	bash scripts/test.sh

lint: setup
	$(VENV)/bin/ruff check python
	$(VENV)/bin/ruff format --check python

clean:
	rm -rf .poisonwatch target logs
