"""Instructions per call of the sync saver's hot calls, under callgrind.

    valgrind --tool=callgrind --dump-before='*getppid*' \\
        --callgrind-out-file=/tmp/cg/cg.%p .venv/bin/python benchmarks/callgrind_calls.py [N]
    grep -m1 '^totals:' /tmp/cg/cg.*.3 /tmp/cg/cg.*.5 /tmp/cg/cg.*.7

On a SQLite file opened by ``from_conn_string`` (so the kept connection is used):
20 warm-up rounds, then ``N`` (default 50) calls of ``put``, of ``get_tuple`` and of
``put_writes`` (two channels, two writes). ``os.getppid()`` marks the boundaries:
with ``--dump-before='*getppid*'`` callgrind writes one profile per segment, so dump
3 is the ``put`` calls, 5 the ``get_tuple`` calls, 7 the ``put_writes`` calls; divide
their totals by ``N``. The whole process is counted (one thread makes the calls).
"""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from lg_sqla import SQLAlchemySaver


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'callgrind.sqlite'}"
        with SQLAlchemySaver.from_conn_string(url) as saver:
            saver.setup()
            thread: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}

            def put(step: int) -> Any:
                checkpoint = empty_checkpoint()
                checkpoint["id"] = str(uuid.uuid4())
                checkpoint["channel_values"] = {"a": step, "b": "x"}
                checkpoint["channel_versions"] = {"a": step + 1, "b": 1}
                new_versions = {"a": step + 1, "b": 1} if step == 0 else {"a": step + 1}
                return saver.put(thread, checkpoint, {"source": "loop", "step": step}, new_versions)

            stored = None
            for step in range(20):
                stored = put(step)
                saver.put_writes(stored, [("a", step), ("b", "y")], "task")
                saver.get_tuple(thread)
            os.getppid()
            for step in range(20, 20 + calls):
                stored = put(step)
            os.getppid()
            for _ in range(calls):
                saver.get_tuple(thread)
            os.getppid()
            for i in range(calls):
                saver.put_writes(stored, [("a", i), ("b", "y")], f"task{i}")
            os.getppid()


if __name__ == "__main__":
    main()
