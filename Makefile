# migrator: set-up, demo, tests and lint. Everything runs from the virtualenv .venv.
#
#   make demo      venv + install, then scripts/demo.sh: load samples/ into the database
#                  migrator_demo and migrate and verify mappings/demo.yaml, on the local
#                  MariaDB/Redis as they are or on private ones (scripts/services.sh)
#   make test      venv + install, scripts/services.sh, then the test suite on both
#                  engines (tests marked long left out) on TEST_WORKERS pytest-xdist workers
#                  (default 4; 0: one process); pytest finds the servers itself
#                  (tests/local_servers.py)
#   make check     the quick check, under 3 minutes: lint, the pure tests, and one smoke test
#                  per command (pytest -m smoke) on MariaDB
#   make test-long the tests marked long alone: slow ones whose guarantee a faster default
#                  test covers too (pyproject.toml's markers)
#   make lint      ruff check, ruff format --check, mypy
#   make dist      build the sdist and wheel into dist/ and check them (twine check --strict,
#                  their contents, the tests run from the sdist): scripts/check_dist.py
#   make services  use MariaDB and Redis on 127.0.0.1:3306/6379 where they run, else start
#                  private ones under .services/ (3307/6380); `scripts/services.sh stop` ends those
#
# Other servers for the demo: MIGRATOR_SOURCE_URL=mysql+pymysql://USER:PASSWORD@HOST:PORT/DB and
# MIGRATOR_TARGET_URL=redis://HOST:PORT/0. With Docker instead of local servers: `docker compose
# up -d`, then the same commands; to load the demo through the container's client:
# make demo MYSQL="docker compose exec -T mysql mariadb"

PYTHON ?= python3
# compiled modules are kept (a test run starts hundreds of `migrator` processes): see tests/conftest.py
unexport PYTHONDONTWRITEBYTECODE
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

DEMO_DB ?= migrator_demo
MYSQL ?= $(shell command -v mariadb 2>/dev/null || command -v mysql 2>/dev/null || echo mariadb)
PYTEST_ARGS ?=
# the suite on TEST_WORKERS pytest-xdist workers (0: in one process, which waits on servers and
# child processes most of the time: 4 workers ran ~2.2x its pace on 2 cores; docs/performance.md)
TEST_WORKERS ?= 4
XDIST = $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup,)

.PHONY: demo test test-long check lint dist services install

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[dev]'
	touch $@

services:
	bash scripts/services.sh

demo: $(STAMP)
	DEMO_DB='$(DEMO_DB)' MYSQL='$(MYSQL)' VENV='$(VENV)' bash scripts/demo.sh

# pytest with $(1) before PYTEST_ARGS. The servers: MIGRATOR_TEST_MYSQL_URL/_REDIS_URL where
# set, else the private ones of scripts/services.sh, else the local ones that answer
# (tests/local_servers.py, called by tests/conftest.py: plain pytest finds them the same way)
define pytest_on_servers
	-@bash scripts/services.sh
	$(BIN)/pytest $(1) --durations=30 $(PYTEST_ARGS)
endef

test: $(STAMP)
	$(call pytest_on_servers,$(XDIST))

test-long: $(STAMP)
	$(call pytest_on_servers,$(XDIST) -m long)

check: lint
	MIGRATOR_TEST_ENGINES=mariadb $(MAKE) --no-print-directory test TEST_WORKERS=2 \
	    PYTEST_ARGS='-m "not integration or smoke" $(PYTEST_ARGS)'

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

dist: $(STAMP)
	$(BIN)/python scripts/check_dist.py --outdir dist
