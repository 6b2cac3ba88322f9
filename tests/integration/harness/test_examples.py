"""The examples are safe to copy: the FastAPI app under concurrent requests loses no
turn on any database."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from backends import Backend

REPO = Path(__file__).resolve().parents[3]
THREADS = 8
ROUNDS = 3


def _load_fastapi_app(url: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """examples/fastapi_app.py as uvicorn imports it, on ``url`` (read at import)."""
    monkeypatch.setenv("LG_SQLA_DATABASE_URL", url)
    spec = importlib.util.spec_from_file_location(
        "lg_sqla_example_fastapi_app", REPO / "examples" / "fastapi_app.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


async def test_fastapi_app_counts_every_concurrent_turn(
    fresh_database: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turns of 8 threads at once, 3 rounds: the user's count is the turns served, and
    each thread holds its own turns' messages."""
    example = _load_fastapi_app(fresh_database.async_url, monkeypatch)
    app = example.app
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://app") as client,
    ):
        served = 0
        for round_ in range(ROUNDS):
            replies = await asyncio.gather(
                *(
                    client.post(f"/threads/t{n}/turns", json={"message": f"r{round_} t{n}"})
                    for n in range(THREADS)
                )
            )
            assert [r.status_code for r in replies] == [200] * THREADS
            served += len(replies)
        memory = (await client.get("/users/anonymous")).json()
        assert memory == {"turns": served} and served == THREADS * ROUNDS
        for n in range(THREADS):
            history = (await client.get(f"/threads/t{n}")).json()["messages"]
            assert history[0::2] == [f"r{r} t{n}" for r in range(ROUNDS)]
