"""Offline (``--sql``) DDL for MySQL and MariaDB, printed without a server to ask which
one it is for.

The two name lg_sqla's binary NO PAD key collation differently (mysql_key_collation):
MySQL 8.0.17+ ``utf8mb4_0900_bin``, MariaDB 10.2+ ``utf8mb4_nopad_bin``; each refuses
the other's (MariaDB 10.11: ERROR 1273). DDL printed from a ``mysql://`` URL names both,
each in an executable comment only its server runs: ``/*!80017 ...*/`` runs on MySQL
8.0.17+ and is a plain comment to MariaDB (which skips ``/*!`` comments of versions
50700-99999, MySQL's own), ``/*M!100202 ...*/`` runs on MariaDB 10.2.2+ and is a plain
comment to MySQL. Everything else in that DDL is what both servers get online. A
``mariadb://`` URL prints MariaDB's DDL alone.
"""

from __future__ import annotations

import copy
from typing import Any

from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles

from lg_sqla.dialects.mysql import is_mysql_family

MYSQL_KEY_COLLATION = "utf8mb4_0900_bin"
EITHER_SERVER_KEY_COLLATION = "/*!80017 utf8mb4_0900_bin */ /*M!100202 utf8mb4_nopad_bin */"
# Set on the dialect offline DDL is compiled with (prepare_offline_ddl).
_EITHER_SERVER = "_lg_sqla_mysql_or_mariadb"


def prepare_offline_ddl(dialect: Dialect) -> str | None:
    """Ready ``dialect`` (the one Alembic compiles offline DDL with) and return the line
    that heads the DDL, naming the servers it is for; None for other databases."""
    if not is_mysql_family(dialect):
        return None
    if getattr(dialect, "is_mariadb", False):
        return "-- lg_sqla DDL for MariaDB 10.6+ (a mariadb:// URL)"
    setattr(dialect, _EITHER_SERVER, True)
    return (
        "-- lg_sqla DDL for MySQL 8.0.17+ and MariaDB 10.6+ (each server runs the key "
        "collation named for it in an executable comment; a mariadb:// URL prints "
        "MariaDB's alone)"
    )


@compiles(mysql.VARCHAR, "mysql")
def _key_collation_for_either_server(type_: mysql.VARCHAR, compiler: Any, **kw: Any) -> str:
    if getattr(compiler.dialect, _EITHER_SERVER, False) and type_.collation == MYSQL_KEY_COLLATION:
        type_ = copy.copy(type_)
        type_.collation = EITHER_SERVER_KEY_COLLATION
    return str(compiler.visit_VARCHAR(type_, **kw))
