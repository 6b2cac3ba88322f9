"""Store vectors as real[] on PostgreSQL, so pgvector can rank them in SQL.

Revision ID: 0003_vectors_real_array
Revises: 0002_store_cache
Create Date: 2026-11-23

On PostgreSQL, ``store_vectors.embedding`` becomes ``real[]`` (float4, the same
values the float32 bytes held): pgvector casts a ``real[]`` to its ``vector``
type, where the server has the extension, and the column needs nothing from the
extension, so the schema is the same with or without it. Other dialects keep
float32 little-endian bytes: nothing changes there.

The conversion runs in SQL (offline ``--sql`` too): a temporary function decodes
the IEEE 754 bytes exactly (upgrade), ``float4send`` encodes them (downgrade).

Self-contained on purpose (no lg_sqla imports): a revision is a frozen record
of the schema, it must not change when the package's models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "0003_vectors_real_array"
down_revision: str | None = "0002_store_cache"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# float32 little-endian bytes -> real[], exactly: sign, exponent and mantissa read from
# the bits (PostgreSQL cannot reinterpret an int as a float), scaled by powers of two,
# exact in float8 and then in real. ALTER ... USING allows no subquery: a function.
_TO_REAL_ARRAY = """
CREATE FUNCTION {where}lg_sqla_f4_array(b bytea) RETURNS real[]
LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT coalesce(array_agg((CASE
    WHEN e = 255 AND m = 0 THEN 'Infinity'::float8
    WHEN e = 255 THEN 'NaN'::float8
    WHEN e = 0 THEN m * power(2::float8, -149)
    ELSE (8388608 + m) * power(2::float8, e - 150)
  END * (1 - 2 * s))::real ORDER BY i), '{}')
FROM (
  SELECT i, (x >> 31) & 1 AS s, (x >> 23) & 255 AS e, x & 8388607 AS m
  FROM (
    SELECT i, (get_byte(b, 4 * i)::bigint)
            | (get_byte(b, 4 * i + 1)::bigint << 8)
            | (get_byte(b, 4 * i + 2)::bigint << 16)
            | (get_byte(b, 4 * i + 3)::bigint << 24) AS x
    FROM generate_series(0, length(b) / 4 - 1) AS i
  ) AS words
) AS fields
$$
"""

# real[] -> float32 little-endian bytes: float4send gives each big-endian.
_TO_BYTES = """
CREATE FUNCTION {where}lg_sqla_f4_bytes(a real[]) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT AS $$
SELECT coalesce(string_agg(
    substring(w FROM 4 FOR 1) || substring(w FROM 3 FOR 1)
    || substring(w FROM 2 FOR 1) || substring(w FROM 1 FOR 1), ''::bytea ORDER BY n), ''::bytea)
FROM (SELECT float4send(x) AS w, n FROM unnest(a) WITH ORDINALITY AS u(x, n)) AS words
$$
"""


# The approximate indexes a store's setup() builds over the real[] column (its
# ann_index_config: expressions casting it to pgvector's types, which bytes cannot
# take): dropped before the column goes back to bytes. setup() builds them again
# after an upgrade. A DO block, so that offline --sql output does it too (without a
# "%": offline output doubles it).
_DROP_APPROXIMATE_INDEXES = """
DO $$
DECLARE found text;
BEGIN
  FOR found IN
    SELECT quote_ident(schemaname) || '.' || quote_ident(indexname) FROM pg_indexes
    WHERE tablename = 'store_vectors' AND schemaname = {schema}
      AND (left(indexname, 19) = 'store_vectors_hnsw_'
           OR left(indexname, 22) = 'store_vectors_ivfflat_')
  LOOP
    EXECUTE 'DROP INDEX ' || found;
  END LOOP;
END $$
"""


def _schema() -> str | None:
    # Alembic's ALTER names the table as given, where CREATE TABLE followed env.py's
    # schema_translate_map: the schema the tables are in (the savers' schema=) must be
    # spelled out. env.py puts the version table there too (None offline, --sql).
    schema: str | None = op.get_context().version_table_schema
    return schema


def _functions_at() -> str:
    """Where the conversion function goes: ``pg_temp.``, a session's own; but Citus
    runs the ALTER on each shard of a distributed table on the workers, whose sessions
    have no such function (``schema "pg_temp" does not exist``): there, the tables'
    schema, where Citus creates the function on every node too (dropped right after)."""
    if op.get_context().as_sql:
        return "pg_temp."
    found = op.get_bind().exec_driver_sql("SELECT 1 FROM pg_extension WHERE extname = 'citus'")
    if found.first() is None:
        return "pg_temp."
    schema = _schema()
    return "" if schema is None else '"' + schema.replace('"', '""') + '".'


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    where = _functions_at()
    op.execute(_TO_REAL_ARRAY.replace("{where}", where))
    op.alter_column(
        "store_vectors",
        "embedding",
        schema=_schema(),
        type_=postgresql.ARRAY(postgresql.REAL()),
        existing_nullable=False,
        postgresql_using=f"{where}lg_sqla_f4_array(embedding)",
    )
    op.execute(f"DROP FUNCTION {where}lg_sqla_f4_array(bytea)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema = _schema()
    literal = "current_schema()" if schema is None else "'" + schema.replace("'", "''") + "'"
    op.execute(_DROP_APPROXIMATE_INDEXES.format(schema=literal))
    where = _functions_at()
    op.execute(_TO_BYTES.replace("{where}", where))
    op.alter_column(
        "store_vectors",
        "embedding",
        schema=_schema(),
        type_=sa.LargeBinary(),
        existing_nullable=False,
        postgresql_using=f"{where}lg_sqla_f4_bytes(embedding)",
    )
    op.execute(f"DROP FUNCTION {where}lg_sqla_f4_bytes(real[])")
