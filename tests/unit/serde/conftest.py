"""Shared setup for the serde unit tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _clean_serde_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each test sets the variables it needs; none may leak in from the shell.
    for var in ("LG_SQLA_AES_KEYS", "LANGGRAPH_AES_KEY", "LANGGRAPH_STRICT_MSGPACK"):
        monkeypatch.delenv(var, raising=False)
