"""Citus: every table of lg_sqla's models has a placement (``dialects.citus.PLACEMENT``),
so ``distribute_on_citus`` and the upgrade that creates a table know how to distribute
it; a new table without one fails here, not on a user's cluster."""

from __future__ import annotations

from lg_sqla.dialects.citus import ANCHOR, PLACEMENT
from lg_sqla.models import metadata


def test_every_model_table_has_a_placement_by_one_of_its_key_columns() -> None:
    tables = {t.name: t for t in metadata.sorted_tables}
    assert set(PLACEMENT) == set(tables)
    for name, placement in PLACEMENT.items():
        # Citus needs the distribution column in every unique key: the primary key.
        assert placement.column in tables[name].primary_key.columns, name
        if placement.colocate_with is not None:
            partner = PLACEMENT[placement.colocate_with]
            assert partner.colocate_with is None, name  # a group's first table
            ours = tables[name].c[placement.column].type
            theirs = tables[placement.colocate_with].c[partner.column].type
            assert repr(ours) == repr(theirs), name  # co-location needs the same type
    assert ANCHOR in PLACEMENT
