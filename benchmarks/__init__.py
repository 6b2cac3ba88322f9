"""lg_sqla's benchmark against the official LangGraph savers (``python -m benchmarks``).

Modules:

* ``databases`` - private PostgreSQL / MariaDB servers (tests/servers.py) and a fresh
  database per contender and repeat;
* ``contenders`` - how each saver is opened, the way its own docs tell a user to;
* ``workload`` - the chat-agent ``StateGraph`` (deterministic fake model, tools, a
  ~50 KB notes channel, a plan channel) and the recording of its saver calls;
* ``graph_level`` / ``api_level`` - what is timed, sync and async;
* ``runner`` - interleaved repeats, warm-up, GC handling;
* ``report`` - medians, per-repeat ratios, targets, tables, plots, docs/benchmarks.md;
* ``legacy`` - the older single-purpose modes (ops, concurrent, async, prune, storage).
"""
