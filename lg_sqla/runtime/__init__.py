"""The execution layer: how every plan of lg_sqla meets a database connection.

The checkpointer, the store, the node cache and the maintenance calls are written
as *plans* (``lg_sqla.plans``): generators of statements that do no I/O. This
package is the only code that runs them:

========== ===================================================================
executor   ``Runtime``: one per owner; ``run``/``arun`` = retries, writer lock,
           path choice, one transaction per attempt; ``drive``: a plan on a
           Core ``Connection``
routing    ``choose_path``: Core or direct, decided once per call, every reason
           written beside it
direct     the direct path: compiled SQL on the pooled DBAPI cursor
drivers    the drivers the direct path is allowed on, with their cursor settings
retry      which errors are retried, and how long to wait (the reconnect window)
timeouts   the call timeout: a watchdog that cuts a connection waited on too long
locks      SQLite's in-process writer lock (sync and async)
kept       the pooled connection an owner keeps between direct-path calls
forks      what a forked child resets (kept connections, own pools, locks)
workers    the threads a SQLite file's async calls run in, whole (one hop each)
owning     what ``from_conn_string`` opens: keep, stop the sweeper, release, dispose
bound      ``bound(target)``: plans on the caller's connection or session, inside
           its transaction, one SAVEPOINT per call, never retried
========== ===================================================================

Nothing here knows what a checkpoint is; nothing outside it opens a transaction
for a plan.
"""

from lg_sqla.runtime.executor import Runtime, drive
from lg_sqla.runtime.routing import DIRECT_PATH_OPTION, Path, choose_path

__all__ = ["DIRECT_PATH_OPTION", "Path", "Runtime", "choose_path", "drive"]
