# cdc-lakehouse. `make run` and `make test` set everything up on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SETUP_STAMP := .cache/setup.stamp
LAKEHOUSE_ROOT ?= $(CURDIR)/lake
export LAKEHOUSE_ROOT
# Keep Spark's driver on loopback (the machine's hostname may resolve elsewhere).
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python

.DEFAULT_GOAL := help
.PHONY: help setup setup-test setup-cluster cluster-up cluster-down cluster-run run test drills report bench bench-check lint format dbt-build dbt-run dbt-test dbt-freshness dbt-docs clean constraints

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

setup: $(SETUP_STAMP) ## create .venv, install pinned packages, resolve the Spark/Kafka jars, build the JVM archive (once)
	@$(BIN)/python -m pyspark_jobs.jvm_archive

$(SETUP_STAMP): pyproject.toml constraints.txt scripts/fetch_jars.sh pyspark_jobs/jars.py scripts/fetch_kafka_broker.sh tools/kafka/pom.xml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,thrift]'
	VENV=$(VENV) bash scripts/fetch_jars.sh
	bash scripts/fetch_kafka_broker.sh
	@mkdir -p $(dir $@) && touch $@

run: setup ## run the whole pipeline on the bundled samples (data/samples)
	$(BIN)/lakehouse run

setup-test: setup setup-cluster ## also install what the tests need beyond Python (headless Chromium, PostgreSQL)
	bash scripts/install_chromium.sh

setup-cluster: setup ## install Debian's PostgreSQL server for the loopback cluster's metastore
	bash scripts/install_postgres.sh

CLUSTER_DIR ?= $(CURDIR)/.cache/cluster
CLUSTER_LAKE ?= file://$(CURDIR)/lake-cluster
cluster-up: setup-cluster ## start PostgreSQL, a Spark master, 2 workers and a Thrift Server on loopback
	$(BIN)/python scripts/cluster.py start --dir $(CLUSTER_DIR) --lake-root $(CLUSTER_LAKE)

cluster-run: setup ## run the pipeline on the cluster of `make cluster-up` (silver through its Thrift Server)
	set -a && . $(CLUSTER_DIR)/cluster.env && set +a && $(BIN)/lakehouse run

cluster-down: ## stop everything `make cluster-up` started (nothing is left running)
	$(BIN)/python scripts/cluster.py stop --dir $(CLUSTER_DIR)

# Two workers, a module each at a time, the longest first (tests/conftest.py). The crash
# drill and the benchmark harness are left out (pyproject's addopts): `make drills`,
# `make bench-check`.
TEST_WORKERS ?= 2
test: setup-test ## run the test suite (TEST_WORKERS=2 in parallel; not the crash drill: make drills)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

drills: setup-test ## only the crash drill, 10 SIGKILLs per pipeline stage, compared with a clean run (about 18 min on 2 cores; CI runs it after make test)
	LAKEHOUSE_DRILL_KILLS=$${LAKEHOUSE_DRILL_KILLS:-10} $(BIN)/python -m pytest -m drill -rP tests/drills

report: setup ## build the data-quality report (Data Docs + run summary) and print its path
	$(BIN)/lakehouse report

BENCH_ARGS ?=
bench: setup ## measure the pipeline beside the copy floor and a hand-written MERGE (BENCH_ARGS="--events 100000")
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

bench-check: setup ## the bench harness end to end at a tiny size (correctness, no timing; 12 to 18 minutes alone on 2 cores)
	$(BIN)/python -m pytest -m bench tests/test_bench_smoke.py

lint: setup ## ruff, mypy and sqlfluff
	$(BIN)/ruff check pyspark_jobs tests benchmarks
	$(BIN)/ruff format --check pyspark_jobs tests benchmarks
	$(BIN)/mypy pyspark_jobs
	$(BIN)/sqlfluff lint models macros

format: setup ## apply ruff's formatting and fixes
	$(BIN)/ruff format pyspark_jobs tests benchmarks
	$(BIN)/ruff check --fix pyspark_jobs tests benchmarks

dbt-build: setup ## analysts: `dbt build` (models, marts on gold, every test) after `make run`
	scripts/analyst_dbt.sh build

dbt-run: setup ## analysts: `dbt run` with the committed profile (after `make run`)
	scripts/analyst_dbt.sh run

dbt-test: setup ## analysts: `dbt test` with the committed profile
	scripts/analyst_dbt.sh test

dbt-freshness: setup ## analysts: `dbt source freshness` of the gold tables
	scripts/analyst_dbt.sh source freshness

dbt-docs: setup ## analysts: generate dbt docs into target/
	scripts/analyst_dbt.sh docs generate

constraints: ## regenerate constraints.txt from the current venv
	{ echo '# Exact versions the project is tested with; `make setup` installs with `-c constraints.txt`.'; \
	  echo '# Regenerate after changing pyproject.toml: `make constraints`.'; \
	  $(BIN)/pip freeze --exclude-editable | grep -v '^cdc-lakehouse'; } > constraints.txt

clean: ## delete the lake (tables, checkpoints, reports) and dbt output; keeps the set-up
	rm -rf lake lake-cluster lake-local target logs
