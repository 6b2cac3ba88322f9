# mypy: disable-error-code="arg-type,type-arg"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""get_delta_channel_history: the SQL walk equals the base class's get_tuple walk.

Randomized trees of checkpoints (forks included), writes on several channels,
seeds at random ancestors; the override must return exactly what
BaseCheckpointSaver's default returns, in a fixed number of statements.
"""

from __future__ import annotations

import random

import pytest
from backends import Backend, EngineFactory
from helpers import checkpoint, config, count_statements, new_thread
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.checkpoint import history

# Also on a MariaDB database at the server's default charset (conftest.py).
pytestmark = pytest.mark.any_charset

CHANNELS = ["messages", "log", "other"]


def _build_tree(saver: SQLAlchemySaver, rng: random.Random, n: int) -> tuple[str, list[dict]]:
    thread_id = new_thread()
    configs: list[dict] = []
    versions: dict[str, dict[str, int]] = {}
    for i in range(n):
        parent = (
            rng.choice(configs)
            if configs and rng.random() < 0.3
            else (configs[-1] if configs else None)
        )
        base_versions = dict(versions[parent["configurable"]["checkpoint_id"]]) if parent else {}
        values: dict[str, object] = {}
        new_versions: dict[str, int] = {}
        for ch in CHANNELS:
            if rng.random() < 0.7:
                new_versions[ch] = base_versions.get(ch, 0) + 1 + i * 10
                roll = rng.random()
                if roll < 0.15:
                    values[ch] = _DeltaSnapshot([f"{ch}-snap-{i}"])
                elif roll < 0.25:
                    values[ch] = [f"{ch}-plain-{i}"]
                elif roll < 0.32:
                    values[ch] = None  # kept inline in the document: a seed all the same
                # else: a delta step: versioned, no stored value
        all_versions = {**base_versions, **new_versions}
        cp = checkpoint(values, all_versions)
        parent_config = parent if parent else config(thread_id)
        stored = saver.put(parent_config, cp, {"step": i}, new_versions)
        for t in range(rng.randint(0, 3)):
            writes = [(rng.choice(CHANNELS), f"w{i}.{t}.{k}") for k in range(rng.randint(1, 3))]
            saver.put_writes(
                stored,
                writes,
                task_id=f"task-{rng.randint(0, 5)}",
                task_path=f"~{rng.randint(0, 2)}",
            )
        versions[stored["configurable"]["checkpoint_id"]] = {
            k: int(str(v).split(".")[0]) for k, v in all_versions.items()
        }
        configs.append(stored)
    return thread_id, configs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matches_base_class_walk(sync_saver: SQLAlchemySaver, seed: int) -> None:
    rng = random.Random(seed)
    thread_id, configs = _build_tree(sync_saver, rng, 40)
    targets = [*rng.sample(configs, 10), config(thread_id)]
    for target in targets:
        channels = rng.sample(CHANNELS, rng.randint(1, 3))
        expected = BaseCheckpointSaver.get_delta_channel_history(
            sync_saver, config=target, channels=channels
        )
        got = sync_saver.get_delta_channel_history(config=target, channels=channels)
        assert got == expected, (target, channels)
    assert sync_saver.get_delta_channel_history(config=configs[0], channels=[]) == {}
    missing = config(thread_id, checkpoint_id="nope")
    assert sync_saver.get_delta_channel_history(config=missing, channels=["log"]) == {
        "log": {"writes": []}
    }


def test_more_channels_than_the_walk_tracks_at_once(sync_saver: SQLAlchemySaver) -> None:
    """Past 62 channels the walk no longer stops at the seeds (history.seed_walk_cte
    tracks one bit per channel) and walks to the root: the answer is the same."""
    rng = random.Random(11)
    thread_id, configs = _build_tree(sync_saver, rng, 30)
    channels = [*CHANNELS, *(f"absent-{k}" for k in range(70))]
    for target in [*rng.sample(configs, 4), config(thread_id)]:
        expected = BaseCheckpointSaver.get_delta_channel_history(
            sync_saver, config=target, channels=channels
        )
        assert sync_saver.get_delta_channel_history(config=target, channels=channels) == expected


def test_past_the_kept_statement_shapes_the_answer_is_the_same(
    sync_saver: SQLAlchemySaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A saver keeps one history statement per channel set, up to history._SHAPES_MAX;
    channel sets beyond are built per call (through Core), with the same answers."""
    monkeypatch.setattr(history, "_SHAPES_MAX", 1)
    rng = random.Random(5)
    thread_id, configs = _build_tree(sync_saver, rng, 12)
    for target in (config(thread_id), configs[5]):
        for channels in (["messages"], ["log", "other"], CHANNELS):
            expected = BaseCheckpointSaver.get_delta_channel_history(
                sync_saver, config=target, channels=channels
            )
            got = sync_saver.get_delta_channel_history(config=target, channels=channels)
            assert got == expected, (target, channels)
    kept = history._shapes[sync_saver.dialect_ops]
    assert len(kept) == 1


def test_statement_count_independent_of_chain_length(
    make_engine: EngineFactory, backend: Backend
) -> None:
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine)
    thread_id = new_thread()
    parent = config(thread_id)
    for i in range(1100):  # past MySQL/MariaDB default recursion cap of 1000
        values = {"log": _DeltaSnapshot(["start"])} if i == 0 else {}
        parent = saver.put(parent, checkpoint(values, {"log": i + 1}), {"step": i}, {"log": i + 1})
        saver.put_writes(parent, [("log", f"entry-{i}")], task_id="t")
    extra = 1 if backend.name == "mysql" else 0  # SET SESSION recursion limit
    with count_statements(engine) as c:
        history = saver.get_delta_channel_history(config=config(thread_id), channels=["log"])
    assert c.count == 1 + extra, c.statements
    assert history["log"]["seed"] == _DeltaSnapshot(["start"])
    assert [w[2] for w in history["log"]["writes"]] == [f"entry-{i}" for i in range(1099)]


async def test_async_matches_sync(
    make_engine: EngineFactory, backend: Backend, sync_saver: SQLAlchemySaver
) -> None:
    rng = random.Random(7)
    thread_id, configs = _build_tree(sync_saver, rng, 25)
    engine = make_engine.aio(backend)
    saver = AsyncSQLAlchemySaver(engine)
    for target in [*configs[-5:], config(thread_id)]:
        expected = sync_saver.get_delta_channel_history(config=target, channels=CHANNELS)
        assert await saver.aget_delta_channel_history(config=target, channels=CHANNELS) == expected
