# Every target installs what it needs (virtualenv, jars) and is safe to re-run.
SHELL := /bin/bash
PYTHON ?= python3
UV_VERSION := 0.13.9
VENV := .venv
PY := $(VENV)/bin/python
VAR := var
VENV_STAMP := $(VENV)/.installed
SPARK_JARS_STAMP := $(VAR)/jars/spark/.fetched
KAFKA_JARS_STAMP := $(VAR)/jars/kafka/.fetched
OBJECT_STORE_JARS_STAMP := $(VAR)/jars/objectstore/.fetched
CATALOG_JARS_STAMP := $(VAR)/jars/catalog/.fetched
CLASS_ARCHIVE := $(VAR)/jars/spark-classes.jsa
MVN := mvn -q -B -s infra/maven-settings.xml
KAPPA := $(PY) -m spark_apps.cli
PYTEST_ARGS ?=
# The suite waits on JVM starts, Airflow and a single-threaded Spark driver more than on the CPU: on 2 cores,
# two workers took 31 min where one took 58 (tests/conftest.py says how the work is split).
TEST_WORKERS ?= 2
BENCH_ARGS ?=

.PHONY: help install jars up sql airflow down demo test unit chaos bench lint docs clean tools browser cluster-up cluster-down cluster-test

help:
	@echo "make demo   - run the end-to-end demo on the embedded setup (installs what is missing)"
	@echo "make test   - run the test suite (starts and stops its own broker and Spark)"
	@echo "make unit   - run the unit tests alone: pure logic, no JVM, no jars, no server (under a minute)"
	@echo "make up     - start the embedded Kafka broker and the catalog database;  make down - stop what make started"
	@echo "make sql    - start the SQL endpoint (Spark Thrift Server) on 127.0.0.1; prints its JDBC URL"
	@echo "make airflow - start Airflow (SQLite, loopback only) with the DAGs in dags/; prints URL and login"
	@echo "make cluster-up   - start 3 KRaft brokers (RF 3, min ISR 2) and a Spark master + 2 workers on 127.0.0.1;"
	@echo "                    prints the KAPPA_* settings that point the apps at them (var/cluster/cluster.env)"
	@echo "make cluster-down - stop that cluster;  make cluster-test - kill a broker mid-stream, prove nothing lost"
	@echo "make chaos  - kill -9, broker restart, zombie writer, OPTIMIZE, disk full, lost checkpoint vs the real stream;"
	@echo "              every scenario must reconcile and check lost=0 duplicated=0 unexpected=0 (var/chaos/report.html)"
	@echo "make bench  - producer, raw Kafka read, plain-append limit, platform stream, latency at 1k and 5k events/s,"
	@echo "              recompute + reconcile, batch cost by table size; bench/results/bench.json and bench.html (BENCH_ARGS=--help);"
	@echo "              make bench BENCH_ARGS=--quick: one 200k size, latency at 1k events/s only (~6 min on 2 cores)"
	@echo "make lint   - ruff over the code"
	@echo "make docs   - regenerate docs/settings.md from the Settings object"
	@echo "make clean  - delete var/ (broker data, warehouse, checkpoints, jars) and the virtualenv"

tools:
	@command -v java >/dev/null || { echo "installing a JDK (apt)"; apt-get update -q && apt-get install -y -q openjdk-17-jdk-headless; }
	@command -v mvn >/dev/null || { echo "installing Maven (apt)"; apt-get update -q && apt-get install -y -q maven; }

# The headless browser the tests render pages in (and `kappa report --screenshot` uses).
browser:
	@command -v chromium >/dev/null || { echo "installing Chromium (apt)"; apt-get update -q && apt-get install -y -q chromium; }

install: $(VENV_STAMP)

$(VENV_STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q "uv==$(UV_VERSION)"
	@echo "installing Python packages from requirements.lock"
	@$(VENV)/bin/uv pip sync -q --python $(PY) requirements.lock
	@$(VENV)/bin/uv pip install -q --python $(PY) --no-deps -e .
	@touch $@

jars: $(SPARK_JARS_STAMP) $(KAFKA_JARS_STAMP) $(CATALOG_JARS_STAMP) $(OBJECT_STORE_JARS_STAMP) $(CLASS_ARCHIVE)

$(SPARK_JARS_STAMP): infra/spark/pom.xml infra/maven-settings.xml | tools
	@echo "fetching Spark jars (Delta, Kafka connector, S3A) from Maven Central"
	@rm -rf $(VAR)/jars/spark
	@$(MVN) -f infra/spark/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(VAR)/jars/spark
	@touch $@

$(KAFKA_JARS_STAMP): infra/kafka/pom.xml infra/maven-settings.xml | tools
	@echo "fetching the Apache Kafka broker jars from Maven Central"
	@rm -rf $(VAR)/jars/kafka
	@$(MVN) -f infra/kafka/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(VAR)/jars/kafka
	@touch $@

$(OBJECT_STORE_JARS_STAMP): infra/objectstore/pom.xml infra/maven-settings.xml | tools
	@echo "fetching the S3-compatible server (S3Proxy) from Maven Central"
	@rm -rf $(VAR)/jars/objectstore
	@$(MVN) -f infra/objectstore/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(VAR)/jars/objectstore
	@touch $@

$(CATALOG_JARS_STAMP): infra/catalog/pom.xml infra/maven-settings.xml | tools
	@echo "fetching the catalog database (Apache Derby network server) jars from Maven Central"
	@rm -rf $(VAR)/jars/catalog
	@$(MVN) -f infra/catalog/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(VAR)/jars/catalog
	@touch $@

# Every Spark driver maps the classes this archive holds instead of loading them again (spark_apps/io/class_archive.py).
$(CLASS_ARCHIVE): $(SPARK_JARS_STAMP) $(CATALOG_JARS_STAMP) $(VENV_STAMP)
	@echo "building the Spark class archive (once, 1-2 min)"
	@$(KAPPA) class-archive

up: install jars
	@$(KAPPA) broker start
	@$(KAPPA) catalog start
	@$(KAPPA) s3 up

sql: up
	@$(KAPPA) sql start

airflow: install jars
	@$(KAPPA) airflow start

down:
	@if [ -x $(PY) ]; then $(KAPPA) airflow stop; $(KAPPA) supervise --stop; $(KAPPA) sql stop; $(KAPPA) broker stop; \
	$(KAPPA) catalog stop; $(KAPPA) s3 stop; $(KAPPA) cluster down; \
	else echo "nothing to stop"; fi

cluster-up: install jars
	@$(KAPPA) cluster up

cluster-down:
	@if [ -x $(PY) ]; then $(KAPPA) cluster down; else echo "nothing to stop"; fi

# The cluster tests start a cluster of their own (throwaway home, free ports), not the one of cluster-up.
cluster-test: install jars browser
	@$(PY) -m pytest -m cluster tests/cluster $(PYTEST_ARGS)

demo: install jars
	@$(KAPPA) demo

test: install jars
	@$(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

unit: install
	@$(PY) -m pytest tests/unit $(PYTEST_ARGS)

chaos: install jars
	@$(KAPPA) chaos

bench: install jars
	@$(PY) -m bench.run $(BENCH_ARGS)

lint: install
	@$(VENV)/bin/ruff check spark_apps dags tests bench

docs: install
	@$(PY) -m spark_apps.core.settings_reference > docs/settings.md
	@echo "docs/settings.md regenerated"

clean: down
	rm -rf $(VAR) $(VENV)
