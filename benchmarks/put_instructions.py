"""Instructions per ``put`` on a SQLite file, for callgrind (no wall clock).

``python -m benchmarks.put_instructions N [--ttl MINUTES]`` makes a migrated SQLite
file, puts 20 checkpoints (two channels each) to warm up, then ``N`` more. Run it
under ``valgrind --tool=callgrind`` with ``N`` and with 0, ``PYTHONHASHSEED=0`` both
times (hash randomization alone moves a run by a few percent): the difference of the
two totals divided by ``N`` is the instructions of one put, statement compilation
excluded (the warm-up compiled them). ``--ttl``: the saver has a ``default_ttl``, so
each put also stamps its checkpoint's expiry (revision 0008). ``--otel``:
``lg_sqla.telemetry.instrument()`` first, on the global providers (the API's no-op
ones unless an SDK was configured: the cost of the spans' bookkeeping alone).

    for n in 0 300; do PYTHONHASHSEED=0 valgrind --tool=callgrind \\
        --callgrind-out-file=/tmp/cg.$n python -m benchmarks.put_instructions $n; done
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint

from lg_sqla import SQLAlchemySaver, migrate

WARM_UP = 20


def _checkpoint(saver: SQLAlchemySaver, i: int) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = f"1ef{i:013d}"
    checkpoint["channel_values"] = {"a": f"value-{i}", "b": [i, i + 1]}
    checkpoint["channel_versions"] = {
        "a": saver.get_next_version(None, None),
        "b": saver.get_next_version(None, None),
    }
    return checkpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("puts", type=int, help="puts after the warm-up (and 0 for the base)")
    parser.add_argument("--ttl", type=float, help="the saver's default_ttl, in minutes")
    parser.add_argument("--otel", action="store_true", help="lg_sqla.telemetry.instrument() first")
    args = parser.parse_args()
    if args.otel:
        from lg_sqla import telemetry

        telemetry.instrument()
    random.seed(7)  # the versions' random suffixes: the same strings every run
    with tempfile.TemporaryDirectory() as tmp:
        engine = sa.create_engine(f"sqlite:///{Path(tmp) / 'puts.sqlite'}")
        migrate.upgrade(engine)
        saver = SQLAlchemySaver(engine, ttl=None if args.ttl is None else {"default_ttl": args.ttl})
        stored: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for i in range(WARM_UP):
            checkpoint = _checkpoint(saver, i)
            versions = dict(checkpoint["channel_versions"])
            stored = saver.put(stored, checkpoint, {"step": i}, versions)
        measured = [_checkpoint(saver, WARM_UP + i) for i in range(args.puts)]
        for checkpoint in measured:
            versions = dict(checkpoint["channel_versions"])
            stored = saver.put(stored, checkpoint, {"step": 1}, versions)
        engine.dispose()


if __name__ == "__main__":
    main()
