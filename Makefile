# pyfsm developer tasks. `make` or `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

.DEFAULT_GOAL := help
.PHONY: help venv system test demo bench bench-ops instructions lint docs mysql mysql-stop

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

venv: $(VENV)/.installed ## create .venv and install pyfsm with its test, lint and docs tools

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

system: ## install the Debian packages the tests use (as root): chromium (browser tests), graphviz (diagrams), galera-4 and rsync (Galera tests)
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium graphviz galera-4 rsync

mysql: ## start a private MySQL 9.7 (Debian sid, cached in ~/.cache/pyfsm-mysql) on 127.0.0.1:3307; prints its DSN (for PYFSM_TEST_DSN)
	scripts/mysql-server start

mysql-stop: ## stop the MySQL server `make mysql` started
	scripts/mysql-server stop

test: venv ## run lint, types and all tests (server: PYFSM_TEST_DSN, else Docker)
	$(VENV)/bin/ruff check pyfsm migrations tests bench
	$(VENV)/bin/mypy pyfsm
	$(PY) -m pytest

demo: venv ## run the order demo in $PYFSM_DSN's database (default mysql://root@127.0.0.1:3306/pyfsm_demo)
	$(VENV)/bin/pyfsm demo

bench: venv ## run the core benchmarks in one run (transitions, counters, locks, engine, relay, reporting at 1M/10M rows): one table beside the INSERT+COMMIT ceiling measured in the same run; updates BENCHMARKS.md (BENCH_ARGS=--quick: short, writes nothing)
	$(PY) bench/run_all.py --write BENCHMARKS.md $(BENCH_ARGS)

bench-ops: venv ## the operators' benchmarks: every web console page and a metrics scrape on the 1M/10M reporting data set (built if missing), the held-locks index at 1M accounts; updates BENCHMARKS.md
	$(PY) bench/bench_console.py --write BENCHMARKS.md
	$(PY) bench/bench_metrics.py --write BENCHMARKS.md
	$(PY) bench/bench_held_locks.py --write BENCHMARKS.md

instructions: venv ## count the server's instructions per transition with callgrind, for each part of a transition (needs valgrind; about 6 minutes; prints a table)
	$(PY) bench/bench_instructions.py

docs: venv ## build the documentation site into site/ (mkdocs, Material theme; --strict: a broken link or a page missing from the nav fails)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: venv ## ruff and mypy only
	$(VENV)/bin/ruff check pyfsm migrations tests bench
	$(VENV)/bin/mypy pyfsm
