"""The two faces of every checkpointer call, from one table.

Each call is written once where its I/O happens: ``SQLAlchemySaver.get_tuple`` on a
sync engine, ``AsyncSQLAlchemySaver.aget_tuple`` on an async one. The other face is
a bridge: a sync saver's ``a*`` method runs the sync one in a worker thread; an async
saver's sync method runs the ``a*`` one on the saver's event loop from another
thread. ``FACES`` names them; the class decorators below check that both classes
have every one and give each bridge its docstring, pointing at the documented face.

A call whose body is one plan (``put``, ``sweep``, ...) is declared once, in
``checkpoint/calls.py``: ``runs_on_engine`` makes the sync saver's native method of
it, ``aruns_on_engine`` the async saver's (``iterates_on_engine`` and
``aiterates_on_engine`` for ``list``), each with the declaration's parameters and
documentation. A function of a saver (``state_upgrade.upgrade_state``) is written
once as what it runs: ``run_by`` and ``arun_by`` make its two faces, through the
saver's ``run``/``arun``.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, ParamSpec, TypeAlias, TypeVar, cast

from lg_sqla.plans import PlanSource
from lg_sqla.runtime import workers

# The calls that have both a sync and an ``a``-prefixed async face on both savers.
FACES: tuple[str, ...] = (
    "run",
    "get_tuple",
    "list",
    "put",
    "put_writes",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
    "sweep",
    "thread_ttl",
    "set_thread_ttl",
    "pin_thread",
    "unpin_thread",
    "sweep_ttl",
    "set_threads_ttl",
    "get_delta_channel_history",
    "reencrypt",
)

SaverClass = TypeVar("SaverClass", bound=type)
_P = ParamSpec("_P")
_R = TypeVar("_R")
_S = TypeVar("_S")
# (The saver is typed Any in the faces below: the type checker matches each face with
# the method it overrides on BaseCheckpointSaver, whose ``self`` is the base class.)


# An iterating face's return annotation (a string: the savers' annotations are
# postponed), as the other face says it.
_ITERATOR = re.compile(r"^Iterator\[(.*)\]$")
_ASYNC_ITERATOR = re.compile(r"^AsyncIterator\[(.*)\]$")


def _returns(face: Callable[..., Any]) -> str:
    return str(inspect.signature(face).return_annotation)


def _named(
    bridge: Callable[..., Any], face: Callable[..., Any], name: str, returns: str | None = None
) -> None:
    """``bridge`` presents itself as ``name``, with ``face``'s signature (``returns``:
    another return annotation)."""
    bridge.__name__ = name
    bridge.__qualname__ = face.__qualname__.rsplit(".", 1)[0] + "." + name
    signature = inspect.signature(face)
    if returns is not None:
        signature = signature.replace(return_annotation=returns)
    bridge.__signature__ = signature  # type: ignore[attr-defined]


def in_worker_thread(
    method: Callable[Concatenate[Any, _P], _R],
) -> Callable[Concatenate[Any, _P], Coroutine[Any, Any, _R]]:
    """The sync saver's ``a*`` face of ``method``: the call runs in a worker thread,
    never blocking the event loop (``method`` looked up on the saver at each call, so a
    subclass's override is the one that runs)."""
    name = method.__name__

    async def bridge(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await workers.in_worker_thread(
            functools.partial(getattr(self, name), *args, **kwargs)
        )

    _named(bridge, method, "a" + name)
    return bridge


def on_loop(
    method: Callable[Concatenate[Any, _P], Coroutine[Any, Any, _R]],
) -> Callable[Concatenate[Any, _P], _R]:
    """The async saver's sync face of ``method`` (an ``a*`` coroutine method): run on
    the saver's event loop, from another thread than the loop's own (``_on_loop``)."""
    name = method.__name__

    def bridge(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        result: _R = self._on_loop(getattr(self, name)(*args, **kwargs))
        return result

    _named(bridge, method, name.removeprefix("a"))
    return bridge


def iterated_in_worker_thread(
    method: Callable[Concatenate[Any, _P], Iterator[_R]],
) -> Callable[Concatenate[Any, _P], AsyncIterator[_R]]:
    """The sync saver's ``a*`` face of an iterating ``method`` (``list``): each step of
    its iterator runs in a worker thread, never blocking the event loop."""
    name = method.__name__

    async def bridge(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> AsyncIterator[_R]:
        iterator: Iterator[_R] = getattr(self, name)(*args, **kwargs)
        done = object()
        step = functools.partial(next, iterator, done)
        while (item := await workers.in_worker_thread(step)) is not done:
            yield cast(_R, item)

    returns = _ITERATOR.sub(r"AsyncIterator[\1]", _returns(method))
    _named(bridge, method, "a" + name, returns=returns)
    return bridge


def iterated_on_loop(
    method: Callable[Concatenate[Any, _P], AsyncIterator[_R]],
) -> Callable[Concatenate[Any, _P], Iterator[_R]]:
    """The async saver's sync face of an async iterating ``method`` (``alist``): each
    step runs on the saver's event loop, from another thread (``_on_loop``)."""
    name = method.__name__

    def bridge(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> Iterator[_R]:
        iterator = getattr(self, name)(*args, **kwargs).__aiter__()
        while True:
            try:
                # An async generator's __anext__ is a coroutine at run time; typed Awaitable.
                step = cast("Coroutine[Any, Any, _R]", iterator.__anext__())
                yield self._on_loop(step)
            except StopAsyncIteration:
                return

    returns = _ASYNC_ITERATOR.sub(r"Iterator[\1]", _returns(method))
    _named(bridge, method, name.removeprefix("a"), returns=returns)
    return bridge


# A call declared once (checkpoint/calls.py): the plan source it runs, whether it is one
# of LangGraph's checkpointer calls (idempotent: ``_checkpointer_call``, else ``run``),
# whether it writes (refused on a read-only saver, naming the face called).
Call: TypeAlias = tuple[PlanSource[_R], bool, bool]
_CALL = re.compile(r"^Call\[(.*)\]$")


def _declared(face: Callable[..., Any], call: Callable[..., Any], name: str, returns: str) -> None:
    """``face`` presents itself as the method ``name`` declared by ``call``: its
    documentation, its parameters (the saver as ``self``) and ``returns``."""
    face.__name__ = face.__qualname__ = name  # (the class decorators add the class)
    face.__doc__ = call.__doc__
    signature = inspect.signature(call)
    saver, *rest = signature.parameters.values()
    face.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[saver.replace(name="self", annotation=inspect.Parameter.empty), *rest],
        return_annotation=returns,
    )


def runs_on_engine(
    call: Callable[Concatenate[Any, _P], Call[_R]],
) -> Callable[Concatenate[Any, _P], _R]:
    """The sync saver's method of ``call``: its plan run on the saver's engine."""
    name = call.__name__.rstrip("_")

    def face(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        source, checkpointer, writes = call(self, *args, **kwargs)
        if writes and self.read_only:  # (_writing refuses: its frame only then)
            self._writing(name)
        # (No typing.cast here: it is a call, and this is the hot calls' path.)
        result: _R = self._checkpointer_call(source) if checkpointer else self.run(source)
        return result

    _declared(face, call, name, _CALL.sub(r"\1", _returns(call)))
    return face


def aruns_on_engine(
    call: Callable[Concatenate[Any, _P], Call[_R]],
) -> Callable[Concatenate[Any, _P], Coroutine[Any, Any, _R]]:
    """The async saver's ``a*`` method of ``call``: its plan run on the saver's engine."""
    name = "a" + call.__name__.rstrip("_")

    async def face(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        source, checkpointer, writes = call(self, *args, **kwargs)
        if writes and self.read_only:  # (see runs_on_engine)
            self._writing(name)
        runs = self._checkpointer_call if checkpointer else self.arun
        result: _R = await runs(source)
        return result

    _declared(face, call, name, _CALL.sub(r"\1", _returns(call)))
    return face


def iterates_on_engine(
    call: Callable[Concatenate[Any, _P], tuple[Any, bool]], returns: str
) -> Callable[Concatenate[Any, _P], Iterator[Any]]:
    """The sync saver's ``list`` of ``call`` (its pages, and whether expiries asked
    refresh): the saver's ``_listed`` walks them, lazily as a generator does."""

    def face(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> Iterator[Any]:
        yield from self._listed(*call(self, *args, **kwargs))

    _declared(face, call, call.__name__.rstrip("_"), returns)
    return face


def aiterates_on_engine(
    call: Callable[Concatenate[Any, _P], tuple[Any, bool]], returns: str
) -> Callable[Concatenate[Any, _P], AsyncIterator[Any]]:
    """The async saver's ``alist`` of ``call``: the saver's ``_alisted`` walks them."""

    async def face(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> AsyncIterator[Any]:
        async for item in self._alisted(*call(self, *args, **kwargs)):
            yield item

    _declared(face, call, "a" + call.__name__.rstrip("_"), returns)
    return face


def _face_of(call: Callable[..., Any], plans: Callable[..., Any], name: str, doc: str) -> None:
    """``call`` presents itself as ``name`` of ``plans``' module, with ``plans``'
    parameters (what it returns is not a plan source but what the plan returns)."""
    call.__name__ = call.__qualname__ = name
    call.__module__ = plans.__module__
    call.__doc__ = doc
    call.__signature__ = inspect.signature(plans).replace(  # type: ignore[attr-defined]
        return_annotation=inspect.Signature.empty
    )


def run_by(
    plans: Callable[Concatenate[_S, _P], PlanSource[_R]], name: str, doc: str
) -> Callable[Concatenate[_S, _P], _R]:
    """The sync face of a function of a saver: ``saver.run`` of the plan source that
    ``plans(saver, ...)`` returns (its checks raise before anything runs)."""

    def call(saver: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        result: _R = cast(Any, saver).run(plans(saver, *args, **kwargs))
        return result

    _face_of(call, plans, name, doc)
    return call


def arun_by(
    plans: Callable[Concatenate[_S, _P], PlanSource[_R]], name: str, doc: str
) -> Callable[Concatenate[_S, _P], Coroutine[Any, Any, _R]]:
    """The async face of ``run_by``'s: ``await saver.arun`` of the same plan source."""

    async def call(saver: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        result: _R = await cast(Any, saver).arun(plans(saver, *args, **kwargs))
        return result

    _face_of(call, plans, name, doc)
    return call


def _document(cls: type, bridge: str, documented: str, how: str) -> None:
    for face in (bridge, documented):
        if face not in vars(cls):  # the table and the class drifted apart
            raise TypeError(f"{cls.__name__} has no {face!r} of its own (checkpoint/twins.py)")
        # (A face made outside the class body, of a call declared once, learns its class.)
        vars(cls)[face].__qualname__ = f"{cls.__qualname__}.{face}"
    method = vars(cls)[bridge]
    if method.__doc__ is None:
        method.__doc__ = f"``{documented}`` {how}; see ``{cls.__name__}.{documented}``."


def sync_bridged(cls: SaverClass) -> SaverClass:
    """The sync saver: each ``a*`` method runs the sync one in a worker thread."""
    for name in FACES:
        _document(cls, "a" + name, name, "in a worker thread, never blocking the event loop")
    return cls


def async_bridged(cls: SaverClass) -> SaverClass:
    """The async saver: each sync method runs the ``a*`` one on the saver's loop."""
    for name in FACES:
        _document(
            cls,
            name,
            "a" + name,
            "for sync code: run on the saver's event loop, from another thread than the loop's own",
        )
    return cls
