"""Where a gateway keeps its sessions' remembered results besides its own memory
(``--state``), so that several replicas behind a load balancer answer a ``_since`` issued
by another.

Each session's :class:`~gcfkit.proxy.held.SessionMemory` (the copy the worker pool keeps
per lane, see :mod:`gcfkit.proxy.held`) and the handles its workers issued are written to
the store after each result that changed them, under a key derived from the session's
``Mcp-Session-Id`` (its SHA-256: the id itself, which lets anyone use the session, is not
written). A replica that gets a request of a session whose stored copy is not the one it
last read or wrote loads it into the session's lane
(:meth:`~gcfkit.transports.offload.Lane.adopt`) before relaying it. Bounds as in memory: a
session's copy holds at most ``max_bytes`` of results (as
:attr:`SessionMemory.bytes <gcfkit.proxy.held.SessionMemory.bytes>` counts them; the least
recently used go first) and expires ``ttl`` seconds after its last write (a Redis TTL, the
gateway's ``--idle-timeout``).

:class:`LocalState` (the default) keeps no session's copy: each replica has only its own
memory.
:class:`RedisState` keeps the copies in Redis through the ``redis`` client library. A store
that fails (Redis down, a timeout) is never the agent's failure: the request goes on as if
no copy were kept (the replica answers from its own memory, in full where it has none).

With the copy goes the name the client declared in ``initialize`` (what its model reads,
:mod:`gcfkit.readers`), so a replica that never saw the handshake treats the client as the
one that saw it does.

**Requests of no session** (the sessionless 2026-07-28 protocol, and servers that give no
``Mcp-Session-Id``): each starts from a fresh core, and a handle is then the only key to a
result. So such results are named unguessably (32 random digits, 106 bits:
:class:`~gcfkit.relative.ResultMemory` ``unguessable``) and kept per *caller*, under the
SHA-256 of the caller's key and the handle (:func:`ref_key`), where the caller's key is the
SHA-256 of the request's ``Authorization`` header (:func:`caller_key`; the credential is
never written). A ``_since`` is answered relative to a kept result only for the caller that
was given it: another credential, or none, finds nothing and gets the full result, as does a
handle nobody issued. Callers with no credential at all share one key, so for them the
handle alone is the binding: whoever was shown it may use it (a bearer of 106 bits). Both
stores keep these results (in this process's memory for :class:`LocalState`, so one replica
answers them too), bounded per caller as one session's memory is (``--ref-results``,
``--ref-bytes``, least recently used first) and expiring ``ttl`` seconds after their last
use; in memory all callers' results together hold at most ``max_bytes``.

>>> import asyncio
>>> asyncio.run(LocalState().load("abc")) is None
True
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ..answers.since import SINCE_ARGUMENT, handle_of
from ..errors import ConfigError
from ..proxy.held import Kept, MemoryReport
from ..relative import DEFAULT_MAX_BYTES, DEFAULT_MAX_RESULTS
from ..relative.memory import Kind
from .offload import Lane

__all__ = [
    "CallerResults",
    "LocalState",
    "RedisState",
    "SessionState",
    "Stored",
    "caller_key",
    "keep_named",
    "named_since",
    "open_state",
    "ref_key",
    "session_key",
    "start_from_named",
]

#: Seconds a store operation may take before the request goes on without it.
_TIMEOUT: Final = 2.0
_PREFIX: Final = "gcfkit:session:"
_REF_PREFIX: Final = "gcfkit:ref:"
_CALLER_PREFIX: Final = "gcfkit:caller:"
#: What a gateway keeps of sessionless results in all, in memory, by default (--max-memory-mb).
_TOTAL_BYTES: Final = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Stored:
    """One session's stored copy: what it remembers, the handles issued for it (never to
    be issued again), the ``stamp`` of the write (a new one each write) and the name the
    client declared (``client``, empty when none)."""

    memory: MemoryReport
    spent: tuple[str, ...]
    stamp: str
    client: str = ""


class SessionState(Protocol):
    """A store of sessions' remembered results shared by the gateway's replicas."""

    @property
    def shared(self) -> bool:
        """Whether anything is kept (False: every call is a no-op)."""
        ...

    async def stamp(self, session_id: str) -> str | None:
        """The stamp of the session's stored copy (None: there is none)."""
        ...

    async def load(self, session_id: str) -> Stored | None:
        """The session's stored copy (None: there is none, or the store failed)."""
        ...

    async def save(
        self, session_id: str, memory: MemoryReport, spent: Sequence[str], client: str = ""
    ) -> str:
        """Write the session's copy (bounded, with the expiry); returns its stamp."""
        ...

    async def drop(self, session_id: str) -> None:
        """The session ended (a DELETE): its copy goes."""
        ...

    async def recall(self, caller: str, handle: str) -> Kept | None:
        """The result of no session ``caller`` (:func:`caller_key`) was given as ``handle``,
        now its most recently used (None: none, expired, or another caller's)."""
        ...

    async def keep(self, caller: str, results: Sequence[Kept]) -> None:
        """Keep ``results`` of no session for ``caller`` (bounded, with the expiry)."""
        ...

    async def aclose(self) -> None: ...


def caller_key(credential: str | None) -> str:
    """Whose results of no session these are: the SHA-256 of the request's credential (its
    ``Authorization`` header); every caller without one has the same key.

    >>> caller_key("Bearer a") != caller_key("Bearer b"), caller_key(None) == caller_key("")
    (True, True)
    """
    data = b"gcfkit-caller\0" + (credential or "").encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def ref_key(caller: str, handle: str) -> str:
    """Where a caller's result of no session is kept: neither the handle nor the caller's
    key is written, only the hash of both.

    >>> ref_key("c", "1") != ref_key("d", "1")
    True
    """
    return hashlib.sha256(f"{caller}\0{handle}".encode("utf-8", "surrogatepass")).hexdigest()


def named_since(message: Any) -> str | None:
    """The handle a ``tools/call`` message names with ``_since`` (None: none, or garbage).
    Whether the proxy answers it (or the tool declares ``_since`` itself) is the core's
    decision; this only says which kept result to fetch for it.

    >>> named_since({"method": "tools/call", "params": {"arguments": {"_since": "123"}}})
    '123'
    """
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    args = params.get("arguments") if isinstance(params, dict) else None
    if not isinstance(args, dict) or SINCE_ARGUMENT not in args:
        return None
    return handle_of(args[SINCE_ARGUMENT])


async def start_from_named(
    store: SessionState, lane: Lane, caller: str, message: Any
) -> str | None:
    """Before a request of no session: the result its call (``message``) names with
    ``_since``, if ``store`` keeps it for ``caller``, is what ``lane`` starts from. Returns
    its handle (None: there is none)."""
    handle = named_since(message)
    kept = await store.recall(caller, handle) if handle is not None else None
    if kept is None:
        return None
    lane.adopt(MemoryReport((kept.handle,), (kept,)), ())
    return kept.handle


async def keep_named(store: SessionState, lane: Lane, caller: str, recalled: str | None) -> None:
    """After a result of no session: what ``lane`` remembers now, but the result it started
    from (``recalled``, kept already), kept for ``caller``."""
    new = [k for k in lane.memory.snapshot().new if k.handle != recalled]
    if new:
        await store.keep(caller, new)


class CallerResults:
    """Results of no session in this process's memory, by :func:`ref_key`: per caller at
    most ``max_results`` and ``max_bytes`` of them, at most ``total_bytes`` in all (least
    recently used first), each forgotten ``ttl`` seconds after its last use.

    >>> store = CallerResults(max_results=1, max_bytes=10, total_bytes=10, ttl=60)
    >>> store.keep("c", [Kept("1", "t", "{}", "text", "x", 1, 0)])
    >>> store.recall("c", "1").text, store.recall("other", "1")
    ('x', None)
    """

    def __init__(
        self,
        *,
        max_results: int = DEFAULT_MAX_RESULTS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        total_bytes: int = _TOTAL_BYTES,
        ttl: float = 3600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_results = max_results
        self.max_bytes = max_bytes
        self.total_bytes = total_bytes
        self.ttl = ttl
        self._clock = clock
        # Every result, least recently used first: (caller, result, when it expires). Each
        # use moves one to the end with a new expiry, so the first expire first.
        self._all: OrderedDict[str, tuple[str, Kept, float]] = OrderedDict()
        self._callers: dict[str, OrderedDict[str, int]] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._all)

    @property
    def bytes(self) -> int:
        """The sizes of the results kept, added up."""
        return self._bytes

    def recall(self, caller: str, handle: str) -> Kept | None:
        self._expire()
        key = ref_key(caller, handle)
        found = self._all.get(key)
        if found is None or found[0] != caller:
            return None
        self._all[key] = (caller, found[1], self._clock() + self.ttl)
        self._all.move_to_end(key)
        self._callers[caller].move_to_end(key)
        return found[1]

    def keep(self, caller: str, results: Sequence[Kept]) -> None:
        self._expire()
        expires = self._clock() + self.ttl
        mine = self._callers.setdefault(caller, OrderedDict())
        for kept in results:
            if kept.size > self.max_bytes:
                continue
            key = ref_key(caller, kept.handle)
            self._drop(key)
            self._all[key] = (caller, kept, expires)
            mine[key] = kept.size
            self._bytes += kept.size
        while len(mine) > self.max_results or sum(mine.values()) > self.max_bytes:
            self._drop(next(iter(mine)))
        while self._bytes > self.total_bytes:
            self._drop(next(iter(self._all)))

    def _drop(self, key: str) -> None:
        found = self._all.pop(key, None)
        if found is None:
            return
        caller, kept, _ = found
        self._bytes -= kept.size
        mine = self._callers.get(caller)
        if mine is not None:
            mine.pop(key, None)
            if not mine:
                del self._callers[caller]

    def _expire(self) -> None:
        now = self._clock()
        while self._all:
            key, (_, _, expires) = next(iter(self._all.items()))
            if expires > now:
                return
            self._drop(key)


class LocalState:
    """No store shared by replicas (the default): each keeps its sessions in its own memory
    only, and its callers' results of no session in a :class:`CallerResults`."""

    shared = False

    def __init__(self, results: CallerResults | None = None) -> None:
        self.results = results or CallerResults()

    async def stamp(self, session_id: str) -> str | None:
        return None

    async def load(self, session_id: str) -> Stored | None:
        return None

    async def save(
        self, session_id: str, memory: MemoryReport, spent: Sequence[str], client: str = ""
    ) -> str:
        return ""

    async def drop(self, session_id: str) -> None:
        return None

    async def recall(self, caller: str, handle: str) -> Kept | None:
        return self.results.recall(caller, handle)

    async def keep(self, caller: str, results: Sequence[Kept]) -> None:
        self.results.keep(caller, results)

    async def aclose(self) -> None:
        return None


def session_key(session_id: str) -> str:
    """The store's key for a session (its id hashed: the id is a bearer of the session).

    >>> session_key("abc")[:24]
    'gcfkit:session:ba7816bf8'
    """
    return _PREFIX + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


def bounded(memory: MemoryReport, max_bytes: int) -> MemoryReport:
    """``memory`` without its least recently used results beyond ``max_bytes`` of them.

    >>> m = MemoryReport(("a", "b"), tuple(Kept(h, "t", "{}", "text", h, 6, 0) for h in "ab"))
    >>> bounded(m, 10).order
    ('b',)
    """
    sizes = {k.handle: k.size for k in memory.new}
    total = sum(sizes.values())
    order = list(memory.order)
    while order and total > max_bytes:
        total -= sizes.get(order.pop(0), 0)
    if len(order) == len(memory.order):
        return memory
    keep = set(order)
    new = tuple(k for k in memory.new if k.handle in keep)
    latest = {call: h for call, h in memory.latest.items() if h in keep}
    return MemoryReport(tuple(order), new, latest, dict(memory.unasked))


def _encode(memory: MemoryReport, spent: Sequence[str], client: str = "") -> str:
    kept = [[k.handle, k.tool, k.args, k.kind, k.text, k.size, k.depth] for k in memory.new]
    body = {
        "order": list(memory.order),
        "new": kept,
        "latest": memory.latest,
        "unasked": memory.unasked,
        "spent": list(spent),
        "client": client,
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _kind(kind: Any) -> Kind:
    return "json" if kind == "json" else "file" if kind == "file" else "text"


def _encode_kept(kept: Kept) -> str:
    body = [kept.tool, kept.args, kept.kind, kept.text, kept.size, kept.depth]
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _decode_kept(handle: str, text: str | bytes) -> Kept | None:
    try:
        t, a, k, x, s, d = json.loads(text)
        return Kept(handle, str(t), str(a), _kind(k), str(x), int(s), int(d))
    except (ValueError, TypeError, RecursionError):
        return None  # not what this version wrote: as if there were none


def _decode(text: str | bytes, stamp: str) -> Stored | None:
    try:
        body = json.loads(text)
        new = tuple(
            Kept(str(h), str(t), str(a), _kind(k), str(x), int(s), int(d))
            for h, t, a, k, x, s, d in body["new"]
        )
        memory = MemoryReport(
            tuple(str(h) for h in body["order"]),
            new,
            {str(c): str(h) for c, h in body["latest"].items()},
            {str(c): int(n) for c, n in body["unasked"].items()},
        )
        client = body.get("client")
        spent = tuple(str(h) for h in body["spent"])
        return Stored(memory, spent, stamp, client if isinstance(client, str) else "")
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None  # not a copy this version wrote: as if there were none


class RedisState:
    """Sessions' copies in Redis (``redis://HOST:PORT/DB``), one hash per session (fields
    ``stamp`` and ``data``) expiring ``ttl`` seconds after its last write. A failing Redis
    is reported once on stderr and otherwise skipped (see the module docstring).

    >>> store = RedisState("redis://127.0.0.1:6379/0", max_bytes=1 << 20, ttl=3600)
    >>> store.shared, store.ttl
    (True, 3600)
    """

    shared = True

    def __init__(
        self,
        url: str,
        *,
        max_bytes: int,
        ttl: float,
        ref_results: int = DEFAULT_MAX_RESULTS,
        ref_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        try:
            import redis.asyncio as aioredis
        except ImportError as e:  # pragma: no cover - the mcp extra installs it
            raise ConfigError(
                "invalid_option", "--state redis://... needs the redis library: gcfkit[mcp]"
            ) from e
        self.max_bytes = max_bytes
        self.ttl = max(1, math.ceil(ttl))
        self.ref_results = ref_results
        self.ref_bytes = ref_bytes
        self._client: Any = aioredis.Redis.from_url(
            url, socket_timeout=_TIMEOUT, socket_connect_timeout=_TIMEOUT
        )
        self._errors: tuple[type[BaseException], ...] = (OSError, aioredis.RedisError)
        self._warned = False

    def _failed(self, error: BaseException) -> None:
        if not self._warned:
            self._warned = True
            print(
                f"gcfkit proxy: --state store failed ({type(error).__name__}); sessions go on "
                "from this replica's memory",
                file=sys.stderr,
                flush=True,
            )

    async def stamp(self, session_id: str) -> str | None:
        try:
            found = await self._client.hget(session_key(session_id), "stamp")
        except self._errors as e:
            self._failed(e)
            return None
        return found.decode("ascii", "replace") if found is not None else None

    async def load(self, session_id: str) -> Stored | None:
        try:
            stamp, data = await self._client.hmget(session_key(session_id), ["stamp", "data"])
        except self._errors as e:
            self._failed(e)
            return None
        if stamp is None or data is None:
            return None
        return _decode(data, stamp.decode("ascii", "replace"))

    async def save(
        self, session_id: str, memory: MemoryReport, spent: Sequence[str], client: str = ""
    ) -> str:
        stamp = secrets.token_hex(8)
        data = _encode(bounded(memory, self.max_bytes), spent, client)
        key = session_key(session_id)
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.hset(key, mapping={"stamp": stamp, "data": data})
                pipe.expire(key, self.ttl)
                await pipe.execute()
        except self._errors as e:
            self._failed(e)
            return ""
        return stamp

    async def drop(self, session_id: str) -> None:
        try:
            await self._client.delete(session_key(session_id))
        except self._errors as e:
            self._failed(e)

    async def recall(self, caller: str, handle: str) -> Kept | None:
        key = ref_key(caller, handle)
        try:
            data = await self._client.getex(_REF_PREFIX + key, ex=self.ttl)
        except self._errors as e:
            self._failed(e)
            return None
        kept = _decode_kept(handle, data) if data is not None else None
        if kept is not None:
            try:  # now the caller's most recently used
                async with self._client.pipeline(transaction=False) as pipe:
                    pipe.zadd(_CALLER_PREFIX + caller, {_member(key, kept.size): time.time()})
                    pipe.expire(_CALLER_PREFIX + caller, self.ttl)
                    await pipe.execute()
            except self._errors as e:
                self._failed(e)
        return kept

    async def keep(self, caller: str, results: Sequence[Kept]) -> None:
        """Each result under its :func:`ref_key`, expiring; the caller's index (a sorted
        set of ``size:key`` by last use) says which go beyond the caller's bounds."""
        index = _CALLER_PREFIX + caller
        now = time.time()
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                for i, kept in enumerate(results):
                    if kept.size > self.ref_bytes:
                        continue
                    key = ref_key(caller, kept.handle)
                    pipe.set(_REF_PREFIX + key, _encode_kept(kept), ex=self.ttl)
                    # In their order: equal scores would be ordered by the hashes instead.
                    pipe.zadd(index, {_member(key, kept.size): now + i * 1e-6})
                pipe.expire(index, self.ttl)
                pipe.zrange(index, 0, -1)
                *_, members = await pipe.execute()
            gone = _beyond(members, self.ref_results, self.ref_bytes)
            if gone:
                async with self._client.pipeline(transaction=False) as pipe:
                    pipe.zrem(index, *gone)
                    pipe.delete(*(_REF_PREFIX + m.partition(":")[2] for m in gone))
                    await pipe.execute()
        except self._errors as e:
            self._failed(e)

    async def aclose(self) -> None:
        with contextlib.suppress(*self._errors):
            await self._client.aclose()


def _member(key: str, size: int) -> str:
    return f"{size}:{key}"


def _beyond(members: Sequence[bytes | str], max_results: int, max_bytes: int) -> list[str]:
    """The members of a caller's index (least recently used first) beyond its bounds.

    >>> _beyond([b"6:a", b"5:b", b"5:c"], 2, 10)
    ['6:a']
    """
    names = [m.decode("ascii", "replace") if isinstance(m, bytes) else m for m in members]
    sizes = [int(n.partition(":")[0]) if n.partition(":")[0].isdigit() else 0 for n in names]
    total = sum(sizes)
    gone: list[str] = []
    for name, size in zip(names, sizes, strict=True):
        if len(names) - len(gone) <= max_results and total <= max_bytes:
            break
        gone.append(name)
        total -= size
    return gone


def open_state(
    url: str | None,
    *,
    max_bytes: int,
    ttl: float,
    ref_results: int = DEFAULT_MAX_RESULTS,
    ref_bytes: int = DEFAULT_MAX_BYTES,
    clock: Callable[[], float] = time.monotonic,
) -> SessionState:
    """The store ``--state URL`` names (None: :class:`LocalState`). ``max_bytes`` and
    ``ttl``: a session's copy's bound and expiry (and, in memory, the bound of all callers'
    results of no session); ``ref_results`` and ``ref_bytes``: each caller's bounds.

    >>> type(open_state(None, max_bytes=1, ttl=1)).__name__
    'LocalState'
    >>> try:
    ...     open_state("memcached://x", max_bytes=1, ttl=1)
    ... except ConfigError as e:
    ...     print(e.code)
    invalid_option
    """
    if url is None:
        results = CallerResults(
            max_results=ref_results,
            max_bytes=ref_bytes,
            total_bytes=max_bytes,
            ttl=ttl,
            clock=clock,
        )
        return LocalState(results)
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(
            "invalid_option", "--state: expected redis://HOST:PORT/DB (or rediss://, unix://)"
        )
    return RedisState(
        url, max_bytes=max_bytes, ttl=ttl, ref_results=ref_results, ref_bytes=ref_bytes
    )
