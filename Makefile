# pyfsm developer tasks. `make` or `make help` lists them.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The server the benchmarks run against (`make bench BENCH_DSN=mysql://root@127.0.0.1:3307/test`:
# the private MySQL of `make mysql`). Only a run on the default server updates BENCHMARKS.md
# unless BENCH_WRITE names the file; bench-servers measures BENCH_DSN beside BENCH_MYSQL_DSN and
# BENCH_MARIADB118_DSN (the private MariaDB 11.8 of `make mariadb`).
BENCH_DEFAULT_DSN := mysql://root@127.0.0.1:3306/test
BENCH_DSN       ?= $(BENCH_DEFAULT_DSN)
BENCH_MYSQL_DSN ?= mysql://root@127.0.0.1:3307/test
BENCH_MARIADB118_DSN ?= mysql://root@127.0.0.1:3308/test
BENCH_WRITE     ?= $(if $(filter $(BENCH_DEFAULT_DSN),$(BENCH_DSN)),BENCHMARKS.md,)
BENCH_WRITE_ARG := $(if $(BENCH_WRITE),--write $(BENCH_WRITE),)
# `make instructions INSTRUCTIONS_ARGS='--server mariadb-11.8 --calls 50'`: one server, or fewer calls
INSTRUCTIONS_ARGS ?=
# The server of the demo and the tests (scripts/dev_server.py): the DSN in the variable if set, else
# a server at 127.0.0.1:3306, else the project's own MySQL (scripts/mysql-server: fetched on first
# use, started on 127.0.0.1:3307, left running), else MySQL 8.4 in Docker; else one line on what to set.
WITH_TEST_SERVER := $(PY) scripts/dev_server.py --env PYFSM_TEST_DSN --database test --
WITH_DEMO_SERVER := $(PY) scripts/dev_server.py --env PYFSM_DSN --database pyfsm_demo --
# the code lint checks; .pre-commit-config.yaml runs `make lint` before each commit
LINT_PATHS := pyfsm migrations tests bench scripts
LINT := $(VENV)/bin/ruff check $(LINT_PATHS) && $(VENV)/bin/ruff format --check $(LINT_PATHS) \
	&& $(VENV)/bin/mypy && $(PY) scripts/import_cycles.py pyfsm
# `make test PYTEST_ARGS='tests/server/test_store.py -x'`: a selection through the same command
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help venv system test test-unit test-server test-clusters test-browser demo bench bench-ops bench-servers bench-attach bench-scale client-instructions instructions lint docs mysql mysql-stop mariadb mariadb-stop

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

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

mariadb: ## start a private MariaDB 11.8 (Debian sid, cached in ~/.cache/pyfsm-mariadb) on 127.0.0.1:3308; prints its DSN (for PYFSM_TEST_DSN)
	scripts/mariadb-server start

mariadb-stop: ## stop the MariaDB server `make mariadb` started
	scripts/mariadb-server stop

test: venv ## run lint, types and all tests (server: PYFSM_TEST_DSN, else 127.0.0.1:3306, else the project's own MySQL, else Docker)
	$(WITH_TEST_SERVER) sh -c '$(LINT) && $(PY) -m pytest $(PYTEST_ARGS)'

test-unit: venv ## only the tests that need no database server: tests/unit and the doctests of pyfsm/ (seconds)
	$(PY) -m pytest tests/unit pyfsm

test-server: venv ## only tests/server: the tests on the one server (chosen as for `make test`) and a Kafka broker they start
	$(WITH_TEST_SERVER) $(PY) -m pytest tests/server $(PYTEST_ARGS)

test-clusters: venv ## only tests/clusters: the tests that start servers of their own (replicas, Galera, Group Replication, restarts; minutes)
	$(WITH_TEST_SERVER) $(PY) -m pytest tests/clusters $(PYTEST_ARGS)

test-browser: venv ## only tests/browser: the web console in Chromium, on the server chosen as for `make test`
	$(WITH_TEST_SERVER) $(PY) -m pytest tests/browser $(PYTEST_ARGS)

demo: venv ## run the order demo in its own database, pyfsm_demo, on PYFSM_DSN's server (never in the database PYFSM_DSN names), else on 127.0.0.1:3306, else on the project's own MySQL (or Docker)
	$(WITH_DEMO_SERVER) $(VENV)/bin/pyfsm demo

bench: venv ## run the core benchmarks in one run (transitions, counters, locks, engine, relay, reporting at 1M/10M rows): one table beside the INSERT+COMMIT ceiling measured in the same run; on BENCH_DSN (default MariaDB's 3306; BENCH_DSN=mysql://root@127.0.0.1:3307/test for `make mysql`'s), updates BENCHMARKS.md on the default server only (BENCH_ARGS=--quick: short, writes nothing)
	$(PY) bench/run_all.py --dsn '$(BENCH_DSN)' $(BENCH_WRITE_ARG) $(BENCH_ARGS)

bench-ops: venv ## the operators' benchmarks: every web console page and a metrics scrape on the 1M/10M reporting data set (built if missing), the held-locks index at 1M accounts; on BENCH_DSN, updates BENCHMARKS.md on the default server only
	$(PY) bench/bench_console.py --dsn '$(BENCH_DSN)' $(BENCH_WRITE_ARG)
	$(PY) bench/bench_metrics.py --dsn '$(BENCH_DSN)' $(BENCH_WRITE_ARG)
	$(PY) bench/bench_held_locks.py --dsn '$(BENCH_DSN)' $(BENCH_WRITE_ARG)

bench-servers: venv ## the transition benchmark on BENCH_DSN (MariaDB 10.11), BENCH_MYSQL_DSN (MySQL 9.7, `make mysql`) and BENCH_MARIADB118_DSN (MariaDB 11.8, `make mariadb`) back to back, twice, each beside its own ceiling; updates BENCHMARKS.md's servers section (about 35 minutes)
	$(PY) bench/bench_servers.py --runs 2 --dsn '$(BENCH_DSN)' --dsn '$(BENCH_MYSQL_DSN)' --dsn '$(BENCH_MARIADB118_DSN)' --write BENCHMARKS.md

bench-attach: venv ## issue 48: a transition of an attached table's row beside a pyfsm-owned type's, a non-state UPDATE beside a table without triggers (1 and 8 clients), adoption of 1,000,000 rows beside INSERT ... SELECT, on BENCH_DSN and BENCH_MYSQL_DSN; three alternating rounds, medians, with the floors (an empty trigger, a hand-written glue trigger); prints the tables for BENCHMARKS.md (about 30 minutes; adoption runs at 5,000-7,500 rows/s where the buffer pool holds the instance table; BENCH_ARGS=--adopt-only for adoption alone)
	$(PY) bench/bench_attach.py --runs 3 --dsn '$(BENCH_DSN)' --dsn '$(BENCH_MYSQL_DSN)' $(BENCH_ARGS)

bench-scale: venv ## issue 49 item 5: Store.send on a type holding 1,000,000 instances and 10,000,000 history rows (bench_reporting's data set, built into pyfsm_bench_scale if missing, ~2 min per server) beside an empty type, 1 and 8 clients, on BENCH_DSN and BENCH_MYSQL_DSN, each with the server's buffer pool and with one of 4 GiB that holds the data set (set for the run, then back); about 25 minutes
	for dsn in '$(BENCH_DSN)' '$(BENCH_MYSQL_DSN)'; do \
	  $(PY) bench/bench_scale.py --dsn "$$dsn" $(BENCH_ARGS) && $(PY) bench/bench_scale.py --dsn "$$dsn" --pool-mb 4096 $(BENCH_ARGS) || exit 1; \
	done

client-instructions: venv ## issue 49: the client's instructions per Store.send and AsyncStore.send beside a plain PyMySQL CALL of the same procedure (in a thread for the async one), counted by callgrind, on BENCH_DSN and BENCH_MYSQL_DSN (needs valgrind; about 5 minutes per server)
	$(PY) bench/bench_client_instructions.py --dsn '$(BENCH_DSN)'
	$(PY) bench/bench_client_instructions.py --dsn '$(BENCH_MYSQL_DSN)'

instructions: venv ## count the server's instructions per transition with callgrind, for each part of a transition, on the system's MariaDB 10.11, the private MariaDB 11.8 and the private MySQL 9.7, each a fresh server of its own (needs valgrind; INSTRUCTIONS_ARGS='--server mariadb-11.8' for one; about 8 minutes; a table per server)
	$(PY) bench/bench_instructions.py $(INSTRUCTIONS_ARGS)

docs: venv ## build the documentation site into site/ (mkdocs, Material theme; --strict: a broken link or a page missing from the nav fails)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: venv ## ruff check, ruff format --check, mypy --strict and the import-circle check only (what pre-commit runs)
	$(LINT)
