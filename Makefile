# migrator: set-up, demo, tests and lint. Everything runs from the virtualenv .venv.
#
#   make demo      venv + install, start MariaDB/Redis if down, load samples/ into the
#                  database migrator_demo, then migrate and verify mappings/demo.yaml
#   make test      venv + install, start the servers if down, then the test suite on both
#                  engines (tests marked long left out) in TEST_WORKERS parallel workers
#                  (pytest-xdist; default 4): about 20 minutes on a 2-core machine
#   make check     the quick check, under 3 minutes: lint, the pure tests, and one smoke test
#                  per command (pytest -m smoke) on MariaDB
#   make test-long the tests marked long alone: slow ones whose guarantee a faster default
#                  test covers too (pyproject.toml's markers)
#   make lint      ruff check, ruff format --check, mypy
#   make dist      build the sdist and wheel into dist/ and check them (twine check --strict,
#                  their contents, the tests run from the sdist): scripts/check_dist.py
#   make services  start MariaDB and Redis on 127.0.0.1 if they are down
#
# With Docker instead of local servers: `docker compose up -d`, then the same commands; to
# load the demo through the container's client: make demo MYSQL="docker compose exec -T mysql mariadb"

PYTHON ?= python3
# compiled modules are kept (a test run starts hundreds of `migrator` processes): see tests/conftest.py
unexport PYTHONDONTWRITEBYTECODE
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

DEMO_DB ?= migrator_demo
MYSQL ?= $(shell command -v mariadb 2>/dev/null || command -v mysql 2>/dev/null || echo mariadb)
MYSQL_ARGS ?= --protocol=TCP --host=127.0.0.1 --port=3306 --user=root --default-character-set=utf8mb4

# Servers for the tests when the environment names none and the local ones answer
# (otherwise the tests fall back to testcontainers, or skip; see tests/conftest.py).
LOCAL_MYSQL_URL ?= mysql+pymysql://root@127.0.0.1:3306
LOCAL_REDIS_URL ?= redis://127.0.0.1:6379
PYTEST_ARGS ?=
# the tests wait on servers and child processes most of the time: more workers than cores
TEST_WORKERS ?= 4

.PHONY: demo test test-long check lint dist services install

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[dev]'
	touch $@

services:
	bash scripts/services.sh

demo: $(STAMP) services
	$(MYSQL) $(MYSQL_ARGS) -e 'CREATE DATABASE IF NOT EXISTS `$(DEMO_DB)` CHARACTER SET utf8mb4'
	for f in samples/*.sql; do \
	    echo "loading $$f into $(DEMO_DB)"; \
	    $(MYSQL) $(MYSQL_ARGS) $(DEMO_DB) < $$f || exit 1; \
	done
	$(BIN)/migrator migrate mappings/demo.yaml
	$(BIN)/migrator verify mappings/demo.yaml

# pytest with $(1) before PYTEST_ARGS, against the local servers when the environment names none
define pytest_on_servers
	-@bash scripts/services.sh
	@if [ -z "$${MIGRATOR_TEST_MYSQL_URL:-}" ] && bash scripts/services.sh check mysql; then \
	    export MIGRATOR_TEST_MYSQL_URL='$(LOCAL_MYSQL_URL)'; fi; \
	if [ -z "$${MIGRATOR_TEST_REDIS_URL:-}" ] && bash scripts/services.sh check redis; then \
	    export MIGRATOR_TEST_REDIS_URL='$(LOCAL_REDIS_URL)'; fi; \
	set -x; $(BIN)/pytest $(1) $(PYTEST_ARGS)
endef

test: $(STAMP)
	$(call pytest_on_servers,-n $(TEST_WORKERS))

test-long: $(STAMP)
	$(call pytest_on_servers,-n $(TEST_WORKERS) -m long)

check: lint
	MIGRATOR_TEST_ENGINES=mariadb $(MAKE) --no-print-directory test TEST_WORKERS=2 \
	    PYTEST_ARGS='-m "not integration or smoke" $(PYTEST_ARGS)'

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

dist: $(STAMP)
	$(BIN)/python scripts/check_dist.py --outdir dist
