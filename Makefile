# Developer entry points. `make test` is the project's test command (also run by .ci/run).
#   make test PYTEST_ARGS="-k mysql -x"   extra pytest arguments
#   make test PYTEST_WORKERS=0            one process, no pytest-xdist (default: 2 workers)
#   make test-min                         a subset at the lowest SQLAlchemy/Alembic allowed
#   make lint                             ruff check, ruff format --check, mypy --strict
#   make demo                             run examples/demo.py in .venv-demo (lg_sqla[demo] only)

PYTHON := .venv/bin/python
PYTEST_ARGS ?=
# pytest-xdist workers for `make test` and `make test-min`: 2 = the cores of a CI machine.
# Each worker starts its own private servers (tests/conftest.py); whole files go to one
# worker (--dist loadfile), so a module-scoped fixture (the Galera cluster, the PostgreSQL
# standby) starts once. 0 = a single process, as a plain `.venv/bin/python -m pytest`
# (what to use for one file: no worker start-up).
PYTEST_WORKERS ?= 2
XDIST := -n $(PYTEST_WORKERS) $(if $(filter 0,$(PYTEST_WORKERS)),,--dist loadfile)

.PHONY: test test-min lint demo bootstrap

# Installs the PostgreSQL/MariaDB packages if missing and syncs .venv; the servers
# themselves are started (and stopped) by the pytest fixtures in tests/conftest.py.
test:
	bash tests/bootstrap.sh && $(PYTHON) -m pytest -q $(XDIST) $(PYTEST_ARGS)

# The official conformance suite, the graph tests, the Alembic CLI's URLs (a driverless
# postgresql:// would pick psycopg2 on SQLAlchemy 2.0) and MariaDB's autocommit sessions
# (they use the asyncmy adapter, which changed in 2.1), on SQLite, PostgreSQL and MariaDB,
# sync and async, in .venv-min: the lowest SQLAlchemy and Alembic versions pyproject.toml
# allows (pins derived from its lower bounds by tests/min_versions.py). .ci/run runs it
# after `make test`.
MIN_VERSIONS_TESTS := tests/integration/checkpoint/test_conformance.py tests/integration/checkpoint/test_graphs.py \
	tests/integration/schema/test_entry_point_urls.py tests/integration/runtime/test_mysql_autocommit.py

test-min:
	bash tests/bootstrap.sh --min-versions && \
	.venv-min/bin/python -c 'import alembic, sqlalchemy; print(f"SQLAlchemy {sqlalchemy.__version__}, Alembic {alembic.__version__}")' && \
	.venv-min/bin/python -m pytest -q $(XDIST) $(MIN_VERSIONS_TESTS) $(PYTEST_ARGS)

# ruff (lint + format) and mypy --strict on the package and the tests (pyproject.toml
# [tool.mypy]; tests/integration/conftest.py on its own: a second module "conftest");
# .ci/run runs it after the tests.
lint:
	bash tests/bootstrap.sh && .venv/bin/ruff check . && .venv/bin/ruff format --check . \
		&& .venv/bin/mypy && .venv/bin/mypy tests/integration/conftest.py

# The demo in a virtualenv of its own, .venv-demo, with only what it needs: lg_sqla and
# its `demo` extra (LangGraph); not the dev group of `make test` (drivers, servers' tools,
# linters, benchmarks). Reinstalled only when pyproject.toml changes.
DEMO_PYTHON := .venv-demo/bin/python

demo:
	@test -x $(DEMO_PYTHON) || python3 -m venv .venv-demo
	@want="$$(sha256sum pyproject.toml | cut -d' ' -f1)"; \
	if [ "$$(cat .venv-demo/.lg_sqla_stamp 2>/dev/null)" != "$$want" ]; then \
		$(DEMO_PYTHON) -m pip install -q -e ".[demo]" </dev/null && echo "$$want" >.venv-demo/.lg_sqla_stamp; \
	fi
	$(DEMO_PYTHON) examples/demo.py

bootstrap:
	bash tests/bootstrap.sh
