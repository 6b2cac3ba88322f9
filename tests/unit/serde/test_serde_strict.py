"""What a database writer's crafted msgpack does, with and without strict mode.

LangGraph revives msgpack ext values by importing `module.name` and calling it.
These tests pin down the exact outcome of a planted payload in each mode, and
that lg_sqla's layers neither bypass nor weaken the allowlist.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import ormsgpack
import pytest
from langgraph.checkpoint.base import _with_msgpack_allowlist
from langgraph.checkpoint.serde import _msgpack
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncrypted
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from lg_sqla.serde import (
    CompressedSerializer,
    EncryptedSerializer,
    PlaintextRejectedError,
    with_msgpack_allowlist,
)

K1 = bytes(range(32))

# LangGraph's msgpack ext codes (langgraph.checkpoint.serde.jsonplus).
EXT_CONSTRUCTOR_SINGLE_ARG = 0
EXT_CONSTRUCTOR_KW_ARGS = 2
EXT_METHOD_SINGLE_ARG = 3
EXT_PYDANTIC_V2 = 5


def craft(code: int, *fields: Any) -> bytes:
    """A msgpack document `{"x": <ext>}` as someone with database write access could store."""
    return ormsgpack.packb({"x": ormsgpack.Ext(code, ormsgpack.packb(fields))})


OS_SYSTEM = craft(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", "echo pwned")


class Tripwire:
    """An arbitrary class: revival would run its constructor."""

    built: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, **kwargs: Any) -> None:
        Tripwire.built.append(kwargs)


TRIPWIRE = craft(EXT_CONSTRUCTOR_KW_ARGS, __name__, "Tripwire", {"cmd": "rm -rf /"})


@pytest.fixture
def events() -> Iterator[list[SerdeEvent]]:
    seen: list[SerdeEvent] = []
    unregister = register_serde_event_listener(seen.append)
    yield seen
    unregister()


@pytest.fixture
def system_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def fake_system(command: str) -> int:
        calls.append(command)
        return 0

    monkeypatch.setattr(os, "system", fake_system)
    return calls


@pytest.fixture(autouse=True)
def _reset_tripwire() -> None:
    Tripwire.built.clear()


def stacks(inner: JsonPlusSerializer) -> list[Any]:
    """The same inner serializer under every lg_sqla layering."""
    return [
        inner,
        CompressedSerializer(inner, threshold_bytes=0),
        EncryptedSerializer.gcm({"k1": K1}, inner),
        EncryptedSerializer.gcm({"k1": K1}, CompressedSerializer(inner, threshold_bytes=0)),
    ]


def store(serde: Any, payload: bytes) -> tuple[str, bytes]:
    """The row `serde` would hold for msgpack bytes `payload` (encrypted if it encrypts)."""
    if isinstance(serde, JsonPlusSerializer):
        return "msgpack", payload
    return serde.encode_layers("msgpack", payload)  # type: ignore[no-any-return]


def test_permissive_mode_runs_the_planted_call(
    system_calls: list[str], events: list[SerdeEvent]
) -> None:
    # The default (LANGGRAPH_STRICT_MSGPACK unset) imports os.system and calls it.
    serde = JsonPlusSerializer(allowed_msgpack_modules=True)
    assert serde.loads_typed(("msgpack", OS_SYSTEM)) == {"x": 0}  # os.system's return value
    assert system_calls == ["echo pwned"]
    assert events == [{"kind": "msgpack_unregistered_allowed", "module": "os", "name": "system"}]


@pytest.mark.parametrize("position", range(4), ids=["plain", "compressed", "gcm", "compressed+gcm"])
def test_strict_mode_returns_the_argument_instead(
    position: int, system_calls: list[str], events: list[SerdeEvent]
) -> None:
    # Strict: the type is not revived; LangGraph substitutes the ext's raw argument.
    serde = stacks(JsonPlusSerializer(allowed_msgpack_modules=None))[position]
    assert serde.loads_typed(store(serde, OS_SYSTEM)) == {"x": "echo pwned"}
    assert system_calls == []
    assert events == [{"kind": "msgpack_blocked", "module": "os", "name": "system"}]


def test_strict_mode_blocks_arbitrary_classes(events: list[SerdeEvent]) -> None:
    for serde in stacks(JsonPlusSerializer(allowed_msgpack_modules=None)):
        assert serde.loads_typed(store(serde, TRIPWIRE)) == {"x": {"cmd": "rm -rf /"}}
    assert Tripwire.built == []
    assert events == [{"kind": "msgpack_blocked", "module": __name__, "name": "Tripwire"}] * 4
    # The same payload is constructed in permissive mode.
    JsonPlusSerializer(allowed_msgpack_modules=True).loads_typed(("msgpack", TRIPWIRE))
    assert Tripwire.built == [{"cmd": "rm -rf /"}]


def test_strict_mode_blocks_pydantic_revival() -> None:
    payload = craft(EXT_PYDANTIC_V2, __name__, "Tripwire", {"a": 1}, "model_validate_json")
    serde = EncryptedSerializer.gcm({"k1": K1}, JsonPlusSerializer(allowed_msgpack_modules=None))
    assert serde.loads_typed(store(serde, payload)) == {"x": {"a": 1}}
    assert Tripwire.built == []


def test_blocked_type_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    # LangGraph logs each blocked (module, name) once per process: use a fresh name.
    module = f"planted_{uuid.uuid4().hex}"
    payload = craft(EXT_CONSTRUCTOR_SINGLE_ARG, module, "Evil", 42)
    serde = EncryptedSerializer.gcm({"k1": K1}, JsonPlusSerializer(allowed_msgpack_modules=None))
    with caplog.at_level(logging.WARNING, logger="langgraph.checkpoint.serde.jsonplus"):
        assert serde.loads_typed(store(serde, payload)) == {"x": 42}
    assert [r.getMessage() for r in caplog.records] == [
        f"Blocked deserialization of {module}.Evil - not in allowed_msgpack_modules. "
        f"Add to allowed_msgpack_modules to allow: [({module!r}, 'Evil')]"
    ]


@pytest.mark.parametrize("strict", [False, True], ids=["permissive", "strict"])
def test_method_calls_are_blocked_in_both_modes(
    strict: bool, system_calls: list[str], events: list[SerdeEvent]
) -> None:
    # EXT_METHOD_SINGLE_ARG only ever allows datetime.fromisoformat.
    payload = craft(EXT_METHOD_SINGLE_ARG, "os", "system", "echo method", "__call__")
    serde = JsonPlusSerializer(allowed_msgpack_modules=None if strict else True)
    assert serde.loads_typed(("msgpack", payload)) == {"x": "echo method"}
    assert system_calls == []
    assert events == [
        {"kind": "msgpack_method_blocked", "module": "os", "name": "system", "method": "__call__"}
    ]


def test_strict_env_is_read_when_our_default_inner_is_built(
    monkeypatch: pytest.MonkeyPatch, system_calls: list[str]
) -> None:
    # LangGraph reads LANGGRAPH_STRICT_MSGPACK once, at import, into this constant;
    # our serializers build their default JsonPlusSerializer at construction.
    monkeypatch.setattr(_msgpack, "STRICT_MSGPACK_ENABLED", True)
    serde = EncryptedSerializer.gcm({"k1": K1}, CompressedSerializer(threshold_bytes=0))
    assert serde.loads_typed(serde.encode_layers("msgpack", OS_SYSTEM)) == {"x": "echo pwned"}
    assert system_calls == []


def test_strict_env_in_a_fresh_process() -> None:
    script = textwrap.dedent(
        """
        import json, os, ormsgpack
        calls = []
        os.system = lambda command: calls.append(command) or 0
        from lg_sqla.serde import CompressedSerializer, EncryptedSerializer
        serde = EncryptedSerializer.from_env(CompressedSerializer(threshold_bytes=0))
        payload = ormsgpack.packb(
            {"x": ormsgpack.Ext(0, ormsgpack.packb(("os", "system", "echo pwned")))}
        )
        row = serde.encode_layers("msgpack", payload)
        print(json.dumps({"tag": row[0], "value": serde.loads_typed(row), "calls": calls}))
        """
    )
    env = {
        **os.environ,
        "LANGGRAPH_STRICT_MSGPACK": "true",
        "LG_SQLA_AES_KEYS": "k1:" + "A" * 43 + "=",
    }
    env.pop("LANGGRAPH_AES_KEY", None)
    repo_root = Path(__file__).resolve().parents[3]  # where lg_sqla/ lives
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        cwd=repo_root,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(result.stdout) == {
        "tag": "msgpack+aesgcm:k1",  # too small to shrink: stored uncompressed
        "value": {"x": "echo pwned"},
        "calls": [],
    }


def test_allowlist_reaches_the_innermost_serializer() -> None:
    strict = EncryptedSerializer.gcm(
        {"k1": K1}, CompressedSerializer(JsonPlusSerializer(allowed_msgpack_modules=None))
    )
    allowed = strict.with_msgpack_allowlist([Tripwire])
    assert allowed is not strict
    assert type(allowed) is EncryptedSerializer
    assert allowed.cipher is strict.cipher
    assert isinstance(allowed.inner, CompressedSerializer)
    assert allowed.inner is not strict.inner
    row = strict.encode_layers("msgpack", TRIPWIRE)
    assert strict.loads_typed(row) == {"x": {"cmd": "rm -rf /"}}
    assert Tripwire.built == []
    assert isinstance(allowed.loads_typed(row)["x"], Tripwire)
    assert Tripwire.built == [{"cmd": "rm -rf /"}]
    # Tuples work as for LangGraph; an entry already present changes nothing.
    assert allowed.with_msgpack_allowlist([(__name__, "Tripwire")]) is allowed


def test_allowlist_is_a_no_op_in_permissive_mode() -> None:
    permissive = EncryptedSerializer.gcm(
        {"k1": K1}, JsonPlusSerializer(allowed_msgpack_modules=True)
    )
    assert permissive.with_msgpack_allowlist([Tripwire]) is permissive


def test_langgraph_saver_helper_does_not_know_our_serializers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Why savers must call our with_msgpack_allowlist: LangGraph's helper warns and
    # leaves the allowlist unapplied.
    serde = EncryptedSerializer.gcm({"k1": K1}, JsonPlusSerializer(allowed_msgpack_modules=None))
    with caplog.at_level(logging.WARNING):
        assert _with_msgpack_allowlist(serde, [(__name__, "Tripwire")]) is serde
    assert "does not support msgpack allowlist" in caplog.text


def test_module_helper_handles_every_kind(caplog: pytest.LogCaptureFixture) -> None:
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    extra = [(__name__, "Tripwire")]
    ours = CompressedSerializer(strict)
    assert isinstance(with_msgpack_allowlist(ours, extra), CompressedSerializer)
    assert with_msgpack_allowlist(ours, extra) is not ours
    assert with_msgpack_allowlist(strict, extra) is not strict
    lg = LangGraphEncrypted.from_pycryptodome_aes(strict, key=b"k" * 16)
    lg_allowed = with_msgpack_allowlist(lg, extra)
    assert isinstance(lg_allowed, LangGraphEncrypted) and lg_allowed is not lg

    class Opaque:
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            return "x", b""

        def loads_typed(self, data: tuple[str, bytes]) -> Any:
            return None

    opaque = Opaque()
    with caplog.at_level(logging.WARNING, logger="lg_sqla.serde"):
        assert with_msgpack_allowlist(opaque, extra) is opaque
    assert "Serializer Opaque does not support a msgpack allowlist" in caplog.text


def test_encryption_without_plaintext_stops_planted_rows(system_calls: list[str]) -> None:
    # Without the key, a writer can only plant plaintext rows; refusing them closes
    # the hole even in permissive msgpack mode.
    serde = EncryptedSerializer.gcm(
        {"k1": K1}, JsonPlusSerializer(allowed_msgpack_modules=True), allow_plaintext=False
    )
    with pytest.raises(PlaintextRejectedError):
        serde.loads_typed(("msgpack", OS_SYSTEM))
    assert system_calls == []
    # With plaintext allowed (the migration default) the planted row runs.
    lenient = EncryptedSerializer.gcm({"k1": K1}, JsonPlusSerializer(allowed_msgpack_modules=True))
    lenient.loads_typed(("msgpack", OS_SYSTEM))
    assert system_calls == ["echo pwned"]
