"""Shared pytest fixtures for the lg_sqla test suite."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# tests/ is not a package; make tests/servers.py importable from any test module.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from citus import CitusCluster, citus_cluster, citus_opted_out, missing_citus
from galera import GaleraCluster, galera_cluster
from servers import mysql_server, pgvector_server, postgres_server

# ---------------------------------------------------------------------------
# Database servers (provisioning lives in tests/servers.py)
#
# Session-scoped and lazy: a server starts only when the first test asks for
# it, at most once per session, and stops at the end. Each fixture yields an
# admin base URL without driver or database, e.g.
# "postgresql://postgres@127.0.0.1:PORT"; build real URLs with
# servers.sqlalchemy_url() and per-test databases with servers.create_database().
# If a server cannot be provided the fixture ERRORS, it never skips: a green
# run must mean the dialect was really tested.
# ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="session")
def pgvector_admin_url() -> Iterator[str]:
    """A second PostgreSQL server, with pgvector (tests/servers.py: pgvector_server)."""
    with pgvector_server() as url:
        yield url


@pytest.fixture(scope="session")
def mysql_admin_url() -> Iterator[str]:
    with mysql_server() as url:
        yield url


@pytest.fixture(scope="module")
def galera() -> Iterator[GaleraCluster]:
    """A 3-node MariaDB Galera Cluster on loopback (tests/galera.py): one admin URL per node.

    Per module (one uses it: test_galera.py): its three servers stop as soon as that
    module is done, instead of holding memory and CPU while the rest of the suite runs."""
    with galera_cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def citus() -> Iterator[CitusCluster]:
    """A Citus coordinator and two workers on loopback (tests/citus.py): admin URLs.

    Per session, started by the first test that asks (every citus test is in
    tests/integration/clusters/test_citus.py, so with --dist loadfile one worker starts
    it). Without Citus installed it fails, naming the fix; ``LG_SQLA_TEST_CITUS=0``
    skips the citus tests instead, explicitly."""
    if citus_opted_out():
        pytest.skip(f"LG_SQLA_TEST_CITUS=0: no Citus cluster ({missing_citus() or 'opted out'})")
    with citus_cluster() as cluster:
        yield cluster


# ---------------------------------------------------------------------------
# Hypothesis: CI machines are small and shared (2 cores, database servers on
# them too), so generation speed is not a failure; examples stay bounded per test.
# ---------------------------------------------------------------------------
settings.register_profile(
    "lg_sqla", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.load_profile("lg_sqla")
