# Developer entry points. `make test` is the project's test command (also run by .ci/run).
#   make test PYTEST_ARGS="-k mysql -x"   extra pytest arguments
#   make test-min                         a subset at the lowest SQLAlchemy/Alembic allowed
#   make lint                             ruff check, ruff format --check, mypy --strict
#   make demo                             run examples/demo.py (no database servers needed)

PYTHON := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: test test-min lint demo bootstrap

# Installs the PostgreSQL/MariaDB packages if missing and syncs .venv; the servers
# themselves are started (and stopped) by the pytest fixtures in tests/conftest.py.
test:
	bash tests/bootstrap.sh && $(PYTHON) -m pytest -q $(PYTEST_ARGS)

# The official conformance suite and the graph tests, on SQLite, PostgreSQL and MariaDB,
# sync and async, in .venv-min: the lowest SQLAlchemy and Alembic versions pyproject.toml
# allows (pins derived from its lower bounds by tests/min_versions.py). .ci/run runs it
# after `make test`.
MIN_VERSIONS_TESTS := tests/integration/test_conformance.py tests/integration/test_graphs.py

test-min:
	bash tests/bootstrap.sh --min-versions && \
	.venv-min/bin/python -c 'import alembic, sqlalchemy; print(f"SQLAlchemy {sqlalchemy.__version__}, Alembic {alembic.__version__}")' && \
	.venv-min/bin/python -m pytest -q $(MIN_VERSIONS_TESTS) $(PYTEST_ARGS)

# ruff (lint + format) and mypy --strict on the package and the tests (pyproject.toml
# [tool.mypy]; tests/integration/conftest.py on its own: a second module "conftest");
# .ci/run runs it after the tests.
lint:
	bash tests/bootstrap.sh && .venv/bin/ruff check . && .venv/bin/ruff format --check . \
		&& .venv/bin/mypy && .venv/bin/mypy tests/integration/conftest.py

demo:
	LG_SQLA_BOOTSTRAP_SERVERS=0 bash tests/bootstrap.sh && $(PYTHON) examples/demo.py

bootstrap:
	bash tests/bootstrap.sh
