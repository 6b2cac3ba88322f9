"""A throwaway Citus cluster on loopback, for the ``citus`` tests: a coordinator and two
workers, each a private PostgreSQL 15 server of ``tests/servers.py`` started with
``shared_preload_libraries = 'citus'``.

Citus itself comes from ``../shared/citus`` (Citus 13.2.2 prebuilt for Debian 12's
``postgresql-15``), which ``tests/bootstrap.sh`` installs into PostgreSQL's directories.
Without it the cluster fails to start with a ``RuntimeError`` that says how to get it,
unless ``LG_SQLA_TEST_CITUS=0`` (an explicit opt-out: the citus tests are then skipped,
saying so). Nothing skips silently.

Citus keeps its node list per database, so :func:`create_citus_database` makes a
database on every node, creates the extension in each, names the coordinator and adds
the workers: each test module (or test) gets a cluster database of its own.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from servers import _admin_connection, _local_postgres, create_database, drop_database
from sqlalchemy.engine import make_url

CITUS_ENV = "LG_SQLA_TEST_CITUS"  # "0": no Citus here, skip the citus tests (explicitly)
CITUS_LIB = Path("/usr/lib/postgresql/15/lib/citus.so")
# Small shards for speed: 8 per distributed table (Citus's default is 32), which still
# spreads threads over both workers.
SHARD_COUNT = 8
_CONF = (
    "shared_preload_libraries = 'citus'\n"
    f"citus.shard_count = {SHARD_COUNT}\n"
    # Each node connects to the others: the default 100 leaves room, but the per-node
    # pool Citus opens for a multi-shard statement is bounded for a 2-core box.
    "citus.max_adaptive_executor_pool_size = 4\n"
    "max_prepared_transactions = 50\n"  # two-phase commits of multi-shard writes
)
WORKERS = 2


def citus_opted_out() -> bool:
    return os.environ.get(CITUS_ENV, "1") == "0"


def missing_citus() -> str | None:
    """Why the cluster cannot start (None: it can)."""
    if CITUS_LIB.is_file():
        return None
    return (
        f"Citus is not installed ({CITUS_LIB} is missing). Run `bash tests/bootstrap.sh`, "
        "which installs it from ../shared/citus (or from $LG_SQLA_CITUS_DIR), or set "
        f"{CITUS_ENV}=0 to skip the citus tests on purpose."
    )


@dataclass(frozen=True)
class CitusCluster:
    """Admin URLs (``postgresql://postgres@127.0.0.1:PORT``): the coordinator, then the
    workers."""

    coordinator: str
    workers: tuple[str, ...]
    started_in_s: float = 0.0


@contextlib.contextmanager
def citus_cluster() -> Iterator[CitusCluster]:
    why = missing_citus()
    if why is not None:
        raise RuntimeError(why)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        urls = [
            stack.enter_context(_local_postgres(name=f"citus{n}", extra_conf=_CONF))
            for n in range(1 + WORKERS)
        ]
        yield CitusCluster(urls[0], tuple(urls[1:]), time.monotonic() - started)


def _port(url: str) -> int:
    port = make_url(url).port
    assert port is not None
    return port


def create_citus_database(cluster: CitusCluster, name: str) -> None:
    """Database ``name`` on every node with the citus extension, its workers added on
    the coordinator (whose own address is set, so workers can reach it back)."""
    for url in (cluster.coordinator, *cluster.workers):
        create_database(url, name)
        with _admin_connection(f"{url}/{name}") as conn:
            conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS citus"))
    with _admin_connection(f"{cluster.coordinator}/{name}") as conn:
        conn.execute(
            sa.text("SELECT citus_set_coordinator_host('127.0.0.1', :port)"),
            {"port": _port(cluster.coordinator)},
        )
        for worker in cluster.workers:
            conn.execute(
                sa.text("SELECT citus_add_node('127.0.0.1', :port)"), {"port": _port(worker)}
            )


def drop_citus_database(cluster: CitusCluster, name: str) -> None:
    for url in (cluster.coordinator, *cluster.workers):
        drop_database(url, name)
