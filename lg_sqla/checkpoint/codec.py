"""Pure conversions between LangGraph objects and our rows. No I/O.

Storage shape:

* ``checkpoints.checkpoint`` is the LangGraph checkpoint document *without*
  ``channel_values``; its ``channel_versions`` (and ``versions_seen``) hold
  versions as strings, the form blob keys use.
* a channel value lives in ``checkpoint_blobs`` at its version, written once,
  when the version is new; except the values ``dump_values`` keeps inline: ``None``,
  and under LangGraph's plain serializer small bool, int (64-bit) and str (up to
  ``INLINE_STR_MAX`` characters, no NUL) of those exact types, kept in the
  document's ``inline_values`` as ``{channel: [value]}`` (in every checkpoint
  whose channel holds them, not once per version); and a versioned channel
  without a value (a DeltaChannel between snapshots, a consumed branch), which has
  no row at all and loads as absent. A channel both inline and in a blob reads the
  inline value; ``reencrypt`` under an encrypting serializer moves inline values
  to blobs (``rotation``).
* rows written before that are read alongside: an ``"empty"`` blob (how a
  versioned channel without a value used to be stored) loads as absent, a
  ``"null"`` blob as ``None``, whatever the document inlines.
"""

from __future__ import annotations

import functools
import operator
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import TASKS

from lg_sqla import limits
from lg_sqla.checkpoint.checks import (
    INT64_MAX,
    INT64_MIN,
    check_length,
    check_text,
    encodable,
    strip_nul,
    strip_nul_walk,
)
from lg_sqla.checkpoint.json_values import json_loads
from lg_sqla.errors import InvalidInputError
from lg_sqla.plans import Record
from lg_sqla.serde.errors import SerdeError, WrongSerializerError
from lg_sqla.serde.tags import parse_type_tag
from lg_sqla.shared import key_hash

EMPTY_TYPE = "empty"
# The document key of the values kept inline, each wrapped in a one-element list, so
# that a JSON path to it is never JSON null (SQLite's json_extract returns SQL NULL
# for both a null and a missing member; the history walk in SQL tells them apart).
INLINE_KEY = "inline_values"
# The document member recording that every channel of its ``channel_versions`` has its
# value inline (``INLINE_KEY``): a checkpoint that names no blob. A reader may then
# leave its blobs unread, as they could change nothing (the inline value wins). Its
# first member, so SQLite tells it from the text's first bytes without parsing the
# document (``DialectOps.unless_all_inline``); absent from documents written before,
# whose blobs are read as ever. Never taken from a checkpoint, never handed back.
ALL_INLINE_KEY = "all_inline"
# Type tags of serializers that store a value as plain data (LangGraph's
# JsonPlusSerializer: "null" for None). A tag with a layer ("msgpack+aes",
# "null+zstd"...) or a serializer of its own keeps every value in checkpoint_blobs.
_PLAIN_TAGS = frozenset({"null", "msgpack", "json"})


# and is not remembered). Bounded: emptied when full. The same for every saver.
# (maximum -> the str values that passed checked_key with it: a str looked up by its
# cached hash, not a tuple built and hashed per lookup)
_PASSED_KEYS: dict[int, set[str]] = {}
_PASSED_KEYS_MAX = 8192  # (per maximum)


def _passed_keys(maximum: int) -> set[str]:
    return _PASSED_KEYS.setdefault(maximum, set())


def checked_key(field: str, value: Any, maximum: int) -> str:
    """:func:`check_length` (``maximum`` < 0: :func:`check_text`), remembering the str
    values that passed."""
    if type(value) is not str:  # refused, uncached
        return check_text(field, value)
    passed = _PASSED_KEYS.get(maximum)
    if passed is None:
        passed = _passed_keys(maximum)
    elif value in passed:
        return value
    # A new id (each put's checkpoint id): short ASCII without NUL passes without calls.
    if not (value.isascii() and "\x00" not in value and len(value) <= maximum):
        check_text(field, value) if maximum < 0 else check_length(field, value, maximum)
    if len(passed) >= _PASSED_KEYS_MAX:
        passed.clear()
    passed.add(value)
    return value


# (checkpoint_key's lookups: the sets themselves, emptied in place, never replaced)
_PASSED_THREADS = _passed_keys(limits.THREAD_ID_MAX)
_PASSED_NAMESPACES = _passed_keys(-1)
_PASSED_CHECKPOINT_IDS = _passed_keys(limits.CHECKPOINT_ID_MAX)


def new_checkpoint_id(value: Any) -> str:
    """``checked_key("checkpoint id", value, CHECKPOINT_ID_MAX)`` of a put's own
    checkpoint id, new on nearly every put: a short ASCII one without NUL is remembered
    without looking it up first; any other takes ``checked_key``."""
    if (
        type(value) is str
        and value.isascii()
        and "\x00" not in value
        and len(value) <= limits.CHECKPOINT_ID_MAX
    ):
        passed = _PASSED_CHECKPOINT_IDS
        if len(passed) >= _PASSED_KEYS_MAX:
            passed.clear()
        passed.add(value)
        return value
    return checked_key("checkpoint id", value, limits.CHECKPOINT_ID_MAX)


def checked_text(field: str, value: Any) -> str:
    """:func:`check_text`, remembering the str values that passed."""
    return checked_key(field, value, -1)


def thread_id_str(thread_id: object, field: str = "thread_id") -> str:
    """A thread id as stored: a str, or an int / UUID as its ``str()`` (LangGraph and
    the official savers accept ``{"thread_id": 1}``). ``None`` and other types are
    refused: stored as text they would merge distinct callers into one thread ("None")."""
    if isinstance(thread_id, (int, uuid.UUID)) and not isinstance(thread_id, bool):
        thread_id = str(thread_id)
    elif not isinstance(thread_id, str):
        raise InvalidInputError(
            f"{field} must be a str (or an int or UUID), got {type(thread_id).__name__}: "
            f"{thread_id!r}"
        )
    return checked_key(field, thread_id, limits.THREAD_ID_MAX)


def thread_id_of(config: RunnableConfig) -> str:
    configurable = config.get("configurable") or {}
    if configurable.get("thread_id") is None:
        raise InvalidInputError(
            'config["configurable"]["thread_id"] is required: '
            'invoke the graph with {"configurable": {"thread_id": ...}}'
        )
    thread_id = configurable["thread_id"]
    if type(thread_id) is str:  # (the common case, without thread_id_str's call)
        return checked_key("thread_id", thread_id, limits.THREAD_ID_MAX)
    return thread_id_str(thread_id)


def namespace_of(config: RunnableConfig) -> str:
    checkpoint_ns = (config.get("configurable") or {}).get("checkpoint_ns", "") or ""
    return checked_key("checkpoint_ns", checkpoint_ns, -1)


def checkpoint_id_of(config: RunnableConfig | None, field: str = "checkpoint_id") -> str | None:
    """The config's ``checkpoint_id`` (``None`` when absent or empty), checked."""
    if config is None:
        return None
    checkpoint_id = (config.get("configurable") or {}).get("checkpoint_id")
    if checkpoint_id is None or checkpoint_id == "":
        return None
    return checked_key(field, checkpoint_id, limits.CHECKPOINT_ID_MAX)


# A graph sends the same few channel names and versions on every call, each of them
# many times per checkpoint (channel_versions, then versions_seen of every node): a
# put checks about 30. The checks below remember the strings that passed (a failed
# check raises and is not remembered), so a repeat costs one cache lookup. The caches
# hold valid strings only, bounded, and are the same for every saver of the process.
@functools.lru_cache(maxsize=8192)
def _valid_channel_name(name: str) -> str:
    return check_length("channel name", name, limits.CHANNEL_MAX)


@functools.lru_cache(maxsize=8192)
def _valid_version(version: str) -> str:
    return check_length("channel version", version, limits.VERSION_MAX)


def channel_name(name: Any) -> str:
    """``name`` if it is a channel name lg_sqla stores, else raise naming it."""
    if type(name) is str:  # (anything else is refused by check_length, uncached)
        return _valid_channel_name(name)
    return check_length("channel name", name, limits.CHANNEL_MAX)


def version_str(version: Any) -> str:
    """A channel version as stored: its ``str()`` (LangGraph's are str, int or float)."""
    return _valid_version(version if type(version) is str else str(version))


# The channel names and versions (as stored) that passed their check, looked up
# inline by the put's loops (no call per item); bounded like _PASSED_KEYS.
_PASSED_CHANNELS: set[str] = set()
_PASSED_VERSIONS: set[str] = set()


def _passed(passed: set[str], value: str) -> str:
    if len(passed) >= _PASSED_KEYS_MAX:
        passed.clear()
    passed.add(value)
    return value


def _stringify_versions(versions: Mapping[str, Any]) -> dict[str, str]:
    channels, known = _PASSED_CHANNELS, _PASSED_VERSIONS
    stringified = {}
    for ch, v in versions.items():
        if type(v) is not str:
            v = str(v)
        if type(ch) is not str or ch not in channels:
            ch = _passed(channels, channel_name(ch))
        if v not in known:  # (version_str and _passed inline for a new short ASCII version)
            if not (v.isascii() and "\x00" not in v and len(v) <= limits.VERSION_MAX):
                v = version_str(v)
            if len(known) >= _PASSED_KEYS_MAX:
                known.clear()
            known.add(v)
        stringified[ch] = v
    return stringified


def run_id_of(metadata: Mapping[str, Any]) -> str | None:
    run_id = metadata.get("run_id")
    if run_id is None:
        return None
    return check_length("metadata run_id", str(run_id), limits.RUN_ID_MAX)


def dump_checkpoint_document(checkpoint: Checkpoint) -> dict[str, Any]:
    """The checkpoint without its values; versions as strings."""
    # Channel names and versions are checked (a NUL in them is refused), so only the
    # rest of the document is searched for NUL characters to strip.
    # (copied, then deleted from: a comprehension is a call, and so is each pop; the
    # three members every checkpoint has, read below, are deleted as the statement)
    rest: dict[str, Any] = dict(checkpoint)
    del rest["channel_values"], rest["channel_versions"], rest["versions_seen"]
    # (lg_sqla's own members: never taken from a checkpoint; absent on every put, so a
    # test each, not a pop's call)
    if INLINE_KEY in rest:
        del rest[INLINE_KEY]  # noqa: RUF051
    if ALL_INLINE_KEY in rest:
        del rest[ALL_INLINE_KEY]  # noqa: RUF051
    document: dict[str, Any] = rest
    # The common rest (v, id, ts, updated_channels, no pending sends: str, int, None
    # and lists of str) is searched for NUL here, without serializing it (orjson's
    # text searched for the escape cost ~1.4k instructions more); anything else by
    # strip_nul.
    for value in rest.values():
        kind = type(value)
        if kind is str:
            if "\x00" not in value:
                continue
        elif value is None or kind is int:
            continue
        elif kind is list:
            for item in value:
                if type(item) is not str or "\x00" in item:
                    break
            else:
                continue
        document = strip_nul(rest)
        break
    document["channel_versions"] = _stringify_versions(checkpoint["channel_versions"])
    versions_seen = {}
    stripped = False
    channels, known = _PASSED_CHANNELS, _PASSED_VERSIONS
    for node, seen in checkpoint["versions_seen"].items():
        # A node has seen versions the graph wrote before: channel names and str
        # versions that passed their check already (in this document's
        # channel_versions, or an earlier one's). Then the node's mapping is copied,
        # tested in C, not walked here (~1.4k instructions a channel); else, or for
        # an unhashable version, stringified and checked one by one.
        try:
            passed = channels.issuperset(seen) and known.issuperset(seen.values())
        except TypeError:
            passed = False
        versions_seen[node] = dict(seen) if passed else _stringify_versions(seen)
        stripped = stripped or (type(node) is not str or "\x00" in node)
    if stripped and any("\x00" in node for node in versions_seen if isinstance(node, str)):
        versions_seen = strip_nul_walk(versions_seen)  # node names: stripped, as before
    document["versions_seen"] = versions_seen
    return document


_ABSENT = object()  # a channel_values lookup's default: a channel without a value


def stores_none_plain(serde: SerializerProtocol) -> bool:
    """Whether ``serde`` stores ``None`` as plain data (so it may live in the document)."""
    try:
        return serde.dumps_typed(None)[0] in _PLAIN_TAGS
    except Exception:  # a serializer that refuses None stores what it decides
        return False


# The longest str kept inline, in characters. An inline value is written again in
# every later checkpoint document of the thread until its channel changes, where a
# blob is written once per version, but a blob costs a row of its own (about 150
# bytes of keys and header) and a primary-key index entry of about the same. Up to
# 256 characters (at most ~1 KiB of UTF-8, ~1.5 KiB JSON-escaped) the document stays
# small (MariaDB and SQLite rewrite it whole; PostgreSQL TOASTs it past 2 KiB) while
# the names, flags, counters and short messages of a graph's state are inline.
INLINE_STR_MAX = 256
# The values probed to decide whether a serializer keeps bool/int/str as plain data
# that reads back unchanged (edges of what may be inline included).
_PLAIN_PROBES: tuple[Any, ...] = (True, False, 0, -1, INT64_MAX, INT64_MIN, "", 'q"\\é日\n')


def _stores_primitives_plain(serde: SerializerProtocol) -> bool:
    """Whether ``serde`` is LangGraph's own ``JsonPlusSerializer`` (not a subclass, not
    wrapped: an encrypting or compressing layer, or a serializer of the user's, keeps
    every value carrying data in ``checkpoint_blobs``, where encryption and
    ``reencrypt`` reach it) and stores bool, int and str as plain data that loads back
    equal and of the same type."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    if type(serde) is not JsonPlusSerializer:
        return False
    try:
        for probe in _PLAIN_PROBES:
            stored = serde.dumps_typed(probe)
            back = serde.loads_typed(stored)
            if stored[0] not in _PLAIN_TAGS or type(back) is not type(probe) or back != probe:
                return False
    except Exception:  # a serializer that refuses one keeps them all in blobs
        return False
    return True


# The values probed to decide whether a serializer stores an int and an ASCII str as
# ormsgpack packs them (``packs_plainly``).
_PACKED_PROBES: tuple[Any, ...] = (0, -1, 300, INT64_MAX, INT64_MIN, "", "task", 'q"\\\n\x7f')


def packs_plainly(serde: SerializerProtocol) -> bool:
    """Whether ``serde`` is LangGraph's own ``JsonPlusSerializer`` (not a subclass, not
    wrapped) storing an int (64-bit) and an ASCII str as ``("msgpack",
    ormsgpack.packb(value))``: then ``dump_writes`` packs those itself, the same type
    and bytes without the serializer's two Python calls per value."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    if type(serde) is not JsonPlusSerializer:
        return False
    try:
        return all(serde.dumps_typed(p) == ("msgpack", ormsgpack.packb(p)) for p in _PACKED_PROBES)
    except Exception:  # a serializer that refuses one packs none of them here
        return False


def inline_types(serde: SerializerProtocol) -> frozenset[type]:
    """The types of the values ``serde``'s saver keeps in the checkpoint document
    (``dump_values``; exact types: no subclass such as an IntEnum). Floats are never
    among them: PostgreSQL's JSONB normalises numbers (``1e20`` reads back as an int,
    ``-0.0`` as ``0``) and JSON has no NaN."""
    kinds: set[type] = set()
    if stores_none_plain(serde):
        kinds.add(type(None))
    if _stores_primitives_plain(serde):
        kinds.update((bool, int, str))
    return frozenset(kinds)


def fits_inline(value: Any, kinds: frozenset[type]) -> bool:
    """Whether ``value`` is kept in the document by a saver whose serializer inlines
    ``kinds`` (:func:`inline_types`): its exact type is one of them, and every database's
    JSON stores it as given (an int within 64 bits; a str of at most
    ``INLINE_STR_MAX`` characters, valid Unicode, without NUL, which JSONB refuses)."""
    kind = type(value)
    if kind not in kinds:
        return False
    if kind is str:
        return (
            len(value) <= INLINE_STR_MAX
            and "\x00" not in value
            and (value.isascii() or encodable(value))
        )
    if kind is int:
        return bool(INT64_MIN <= value <= INT64_MAX)
    return True  # None, bool


def dump_values(
    serde: SerializerProtocol,
    values: Mapping[str, Any],
    versions: Mapping[str, Any],
    new_versions: ChannelVersions,
    kinds: frozenset[type] | None = None,
    shared: Mapping[str, Any] | None = None,
) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    """(inline values of the document, blob rows: ``shared``'s columns, then the key and
    value of each).

    Inline: every versioned channel whose value :func:`fits_inline` (``None``, and with
    LangGraph's plain serializer small bool, int and str), as PostgresSaver keeps
    primitives in its document: a blob row costs a row, an index entry and, on SQLite
    and MariaDB, a statement of the put, and ``get_tuple`` reads it back. A value that
    carries data stays in ``checkpoint_blobs`` under any other serializer, where its
    encryption and ``reencrypt`` reach it. Blob rows: the other values of the channels
    whose version is new; a new version without a value (a DeltaChannel between
    snapshots) has no row and loads as absent. ``kinds``: :func:`inline_types` of
    ``serde``, when the caller knows it. ``versions``: a document's ``channel_versions``
    (:func:`dump_checkpoint_document`'s), whose channel names were checked there.
    """
    if kinds is None:
        kinds = inline_types(serde)
    inline: dict[str, list[Any]] = {}
    if kinds:
        for channel in versions:
            value = values.get(channel, _ABSENT)
            kind = type(value)
            # (fits_inline, checked here without a call per channel)
            if kind not in kinds:
                continue
            if kind is str:
                if (
                    len(value) > INLINE_STR_MAX
                    or "\x00" in value
                    or not (value.isascii() or encodable(value))
                ):
                    continue
            elif kind is int and not INT64_MIN <= value <= INT64_MAX:
                continue
            inline[channel] = [value]  # (versions' channel names: checked, see above)
    rows = []
    for channel, version in new_versions.items():
        if channel in inline or channel not in values:
            continue
        type_, blob = serde.dumps_typed(values[channel])
        row = {} if shared is None else dict(shared)
        row["channel"] = channel_name(channel)
        row["version"] = version_str(version)
        row["type"] = type_
        row["blob"] = blob
        rows.append(row)
    return inline, rows


def inline_values(document: Mapping[str, Any]) -> dict[str, Any]:
    """The channel values a checkpoint document holds itself (``INLINE_KEY``): channel ->
    value. Together with the blobs its ``channel_versions`` name (``load_value``), they
    are the checkpoint's ``channel_values``; a channel in both reads the inline one."""
    stored = document.get(INLINE_KEY)
    if not stored:
        return {}
    return {channel: wrapped[0] for channel, wrapped in stored.items()}


def marked_all_inline(document: Mapping[str, Any], records: bool) -> dict[str, Any]:
    """``document`` with ``ALL_INLINE_KEY`` first where every channel it versions has its
    value inline (and the database ``records`` it: ``DialectOps.reads_all_inline``),
    without it otherwise: what a writer that changes a stored document's inline values
    or versions (``rotation``, ``state_upgrade``) writes back."""
    rest = {key: value for key, value in document.items() if key != ALL_INLINE_KEY}
    inline = rest.get(INLINE_KEY) or {}
    if records and all(channel in inline for channel in rest.get("channel_versions") or {}):
        return {ALL_INLINE_KEY: True, **rest}
    return rest


def inline_value_json(text: str | bytes) -> Any:
    """The value of one ``INLINE_KEY`` member read as JSON text by SQL (its wrapper)."""
    return json_loads(text)[0]


def inline_values_json(text: str | bytes) -> dict[str, Any]:
    """``inline_values`` of a document whose ``INLINE_KEY`` member SQL read as JSON text."""
    return inline_values({INLINE_KEY: json_loads(text)})


def written_checkpoint(config: RunnableConfig) -> tuple[str, str, str | None]:
    """The config's thread id, namespace and checkpoint id, checked (as
    :func:`thread_id_of`, :func:`namespace_of` and :func:`checkpoint_id_of`). A
    graph's ``put_writes`` names the checkpoint its ``put`` returned, whose strings
    passed already."""
    return checkpoint_key(config)


def parent_of_put(config: RunnableConfig) -> tuple[str, str, str | None]:
    """The thread id, namespace and parent checkpoint id (``None`` when absent or
    empty) of a ``put``'s config, checked (as :func:`thread_id_of`,
    :func:`namespace_of` and :func:`checkpoint_id_of`). A graph's parent is the
    checkpoint its previous ``put`` returned, whose strings passed already."""
    return checkpoint_key(config, "parent checkpoint_id")


def checkpoint_key(
    config: RunnableConfig, field: str = "checkpoint_id"
) -> tuple[str, str, str | None]:
    """The config's thread id, namespace and checkpoint id (``None`` when absent or
    empty; named ``field`` in an error), checked (as :func:`thread_id_of`,
    :func:`namespace_of` and :func:`checkpoint_id_of`): the key of ``get_tuple``,
    ``put_writes`` and ``put``'s parent. A graph's calls name the thread, namespace and
    checkpoints it used before, whose strings passed already: then one frame, not
    eight."""
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    namespace = configurable.get("checkpoint_ns", "")
    if (
        type(thread_id) is str
        and thread_id in _PASSED_THREADS
        and type(namespace) is str
        and namespace in _PASSED_NAMESPACES
    ):
        checkpoint_id = configurable.get("checkpoint_id")
        if checkpoint_id is None or checkpoint_id == "":
            return thread_id, namespace, None
        if type(checkpoint_id) is str and checkpoint_id in _PASSED_CHECKPOINT_IDS:
            return thread_id, namespace, checkpoint_id
    return (
        thread_id_of(config),
        namespace_of(config),
        checkpoint_id_of(config, field),
    )


# The hash of the default namespace, which nearly every call names (``key_hash``).
DEFAULT_NAMESPACE_HASH = key_hash("")


def namespace_hash(namespace: str) -> str:
    """``key_hash(namespace)``, without hashing the default namespace on every call."""
    return DEFAULT_NAMESPACE_HASH if namespace == "" else key_hash(namespace)


def dump_writes(
    serde: SerializerProtocol,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
    shared: tuple[str, str, str, Any, str | None],
    packs_plain: bool = False,
) -> list[dict[str, Any]]:
    """Write rows (``shared``: their thread_id, checkpoint_ns_hash, checkpoint_id,
    created_at and state_revision; then the write's own columns); special channels get
    fixed negative idx, and a special channel written twice keeps its last write (one
    task: the key is the idx; only special channels can repeat one). ``packs_plain``:
    :func:`packs_plainly` of ``serde``, whose int and ASCII str values are packed here."""
    # A task id is new on nearly every call (one per task): checked here, in C for a short
    # ASCII one, not remembered (it would only push out the ids that repeat).
    if not (
        type(task_id) is str
        and task_id.isascii()
        and "\x00" not in task_id
        and len(task_id) <= limits.TASK_ID_MAX
    ):
        check_length("task_id", task_id, limits.TASK_ID_MAX)
    if not (type(task_path) is str and task_path.isascii() and "\x00" not in task_path):
        check_text("task_path", task_path)
    thread_id, ns_hash, checkpoint_id, created_at, state_revision = shared
    rows = []
    special, channels, repeats = WRITES_IDX_MAP, _PASSED_CHANNELS, False
    dumps, pack = serde.dumps_typed, ormsgpack.packb
    for position, (channel, value) in enumerate(writes):
        if type(channel) is not str or channel not in channels:
            channel = _passed(channels, channel_name(channel))
        idx = special.get(channel, position)
        if idx < 0:
            repeats = True
        kind = type(value)
        if packs_plain and (
            (kind is str and value.isascii()) or (kind is int and INT64_MIN <= value <= INT64_MAX)
        ):
            type_, blob = "msgpack", pack(value)
        else:
            type_, blob = dumps(value)
        # (one dict display: cheaper than a copy of shared columns and six stores)
        rows.append(
            {
                "thread_id": thread_id,
                "checkpoint_ns_hash": ns_hash,
                "checkpoint_id": checkpoint_id,
                "created_at": created_at,
                "state_revision": state_revision,
                "task_id": task_id,
                "task_path": task_path,
                "idx": idx,
                "channel": channel,
                "type": type_,
                "blob": blob,
            }
        )
    if repeats:  # (a special channel: maybe written twice)
        rows = list({row["idx"]: row for row in rows}.values())
    return rows


def load_value(serde: SerializerProtocol, type_: str, blob: bytes | memoryview | None) -> Any:
    if type(blob) is memoryview:  # psycopg2's BYTEA, in a load row's untyped column
        blob = bytes(blob)
    try:
        return serde.loads_typed((type_, blob if blob is not None else b""))
    except SerdeError:
        raise  # lg_sqla's serializers name the key or layer themselves
    except Exception as error:
        if "+" not in type_:
            raise
        # A layered row (compressed and/or encrypted) read by a serializer that does
        # not know the layer: LangGraph's says only "Unknown serialization type".
        raise WrongSerializerError(_serializer_hint(type_)) from error


def _serializer_hint(type_: str) -> str:
    try:
        tag = parse_type_tag(type_)
    except SerdeError:
        return f"a stored value has type {type_!r}, which this saver's serializer cannot read"
    if tag.encryption is None:
        return (
            f"a stored value is compressed (type {type_!r}); configure the saver with "
            "serde=lg_sqla.serde.CompressedSerializer() to read it"
        )
    key = f"AES-GCM key id {tag.key_id!r}" if tag.key_id else "LangGraph's AES-EAX key"
    inner = "CompressedSerializer()" if tag.compression else ""
    return (
        f"a stored value is encrypted (type {type_!r}, {key}); configure the saver with "
        f"serde=lg_sqla.serde.EncryptedSerializer.from_env({inner}) and that key "
        "(see docs/security.md)"
    )


# A stored channel value: (channel, type, blob).
StoredBlob = tuple[str, str, bytes | None]
# A stored pending write, in the order of statements.WRITE_VALUE_COLUMNS:
# (channel, task_id, task_path, idx, type, blob).
StoredWrite = tuple[str, str, str | None, int, str, bytes | None]


def stored_write(row: Record) -> StoredWrite:
    """A write row's values, from a mapping (the readers that fetch by name)."""
    return (row["channel"], row["task_id"], row["task_path"], row["idx"], row["type"], row["blob"])


def _write_order(write: StoredWrite) -> tuple[str, str, int]:
    return writes_sort_key(write[2] or "", write[1], write[3])


def _loaded_blobs(
    serde: SerializerProtocol, blobs: Iterable[StoredBlob], inline: Mapping[str, Any]
) -> dict[str, Any]:
    """The values of a checkpoint's blobs (but the ``inline`` channels' and empty ones)."""
    loads = serde.loads_typed
    values = {}
    for channel, type_, blob in blobs:
        if type_ != EMPTY_TYPE and channel not in inline:
            # (load_value's frame only for what it converts or names: not bytes, or failing)
            if type(blob) is bytes:
                try:
                    values[channel] = loads((type_, blob))
                    continue
                except Exception:
                    pass
            values[channel] = load_value(serde, type_, blob)
    return values


# LangGraph's writes_sort_key as a C getter: (task_path, task_id, idx) of a StoredWrite.
# A row written before task paths were stored has None, which sorts as "" there and
# cannot be compared with a str here: those are sorted by _write_order.
_WRITE_ORDER = operator.itemgetter(2, 1, 3)


def _pending_writes(serde: SerializerProtocol, writes: Iterable[StoredWrite]) -> list[PendingWrite]:
    """The pending writes of a tuple, in ``writes_sort_key`` order, their values loaded."""
    try:
        ordered = sorted(writes, key=_WRITE_ORDER)
    except TypeError:  # (a None task_path beside a str one)
        ordered = sorted(writes, key=_write_order)
    loads = serde.loads_typed
    pending: list[PendingWrite] = []
    for channel, task_id, _, _, type_, blob in ordered:
        # (load_value's frame only for what it converts or names: not bytes, or failing)
        if type(blob) is bytes:
            try:
                pending.append((task_id, channel, loads((type_, blob))))
                continue
            except Exception:
                pass
        pending.append((task_id, channel, load_value(serde, type_, blob)))
    return pending


def _add_parent_sends(
    serde: SerializerProtocol,
    checkpoint: Checkpoint,
    parent_sends: Iterable[StoredWrite],
    next_version: Callable[[], Any],
) -> None:
    """A checkpoint older than format v4: its parent's Send packets as the TASKS channel."""
    sends = sorted(parent_sends, key=_write_order)
    if sends:
        checkpoint["channel_values"][TASKS] = [load_value(serde, s[4], s[5]) for s in sends]
        versions = checkpoint["channel_versions"]
        if versions:
            versions[TASKS] = max(versions.values())
        else:
            versions[TASKS] = next_version()


def build_tuple(
    serde: SerializerProtocol,
    row: Record,
    blobs: Iterable[StoredBlob],
    writes: Iterable[StoredWrite],
    parent_sends: Iterable[StoredWrite] = (),
    *,
    next_version: Callable[[], Any],
) -> CheckpointTuple:
    """A CheckpointTuple from a checkpoint row and its blobs and writes (plain tuples:
    a checkpoint may have thousands of writes). ``parent_sends``: the parent's ``TASKS``
    writes, for checkpoints older than format v4 (LangGraph now expects a channel)."""
    key = (row["thread_id"], row["checkpoint_ns"], row["checkpoint_id"])
    return tuple_of(
        serde,
        key,
        row["parent_checkpoint_id"],
        (row["checkpoint"], row["metadata"]),
        blobs,
        writes,
        parent_sends,
        next_version,
    )


def tuple_of(
    serde: SerializerProtocol,
    key: tuple[str, str, str],
    parent_id: str | None,
    stored: tuple[Any, Any],
    blobs: Iterable[StoredBlob],
    writes: Iterable[StoredWrite],
    parent_sends: Iterable[StoredWrite],
    next_version: Callable[[], Any],
    owned: bool = False,
) -> CheckpointTuple:
    """:func:`build_tuple` of a checkpoint's key (thread id, namespace, id), its parent's
    id and its ``stored`` document and metadata (parsed, or JSON text): ``get_tuple``
    calls it with the values of its row, without a record of them (``owned``: the
    parsed document is its own, which the tuple may take without a copy)."""
    # (json_object, inline_values and typing.cast written out: get_tuple's path)
    document: Any = stored[0]
    # (a document parsed here or by the caller is this tuple's own: no copy of it)
    if isinstance(document, (str, bytes)):
        checkpoint: Checkpoint = json_loads(document)
    elif owned:
        checkpoint = document
    else:
        checkpoint = {**document}  # type: ignore[typeddict-item]
    stored_inline = checkpoint.pop(INLINE_KEY, None)  # type: ignore[misc]
    checkpoint.pop(ALL_INLINE_KEY, None)  # type: ignore[misc]
    # (a loop, not a comprehension: that is a call; no blob, no _loaded_blobs call)
    values: dict[str, Any] = {}
    if stored_inline:
        for channel, wrapped in stored_inline.items():
            values[channel] = wrapped[0]
    if blobs:
        inline, values = values, _loaded_blobs(serde, blobs, values)
        values.update(inline)
    checkpoint["channel_values"] = values
    if checkpoint.get("v", 0) < 4 and parent_id:
        _add_parent_sends(serde, checkpoint, parent_sends, next_version)
    metadata: CheckpointMetadata = stored[1]
    if isinstance(metadata, (str, bytes)):
        metadata = json_loads(metadata)
    thread_id, checkpoint_ns, checkpoint_id = key
    own = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    parent = {"configurable": {**own, "checkpoint_id": parent_id}} if parent_id else None
    own["checkpoint_id"] = checkpoint_id
    # (tuple.__new__: the named tuple by position, without its Python __new__'s frame)
    return tuple.__new__(
        CheckpointTuple,
        (
            {"configurable": own},
            checkpoint,
            metadata,
            parent,
            _pending_writes(serde, writes) if writes else [],
        ),
    )
