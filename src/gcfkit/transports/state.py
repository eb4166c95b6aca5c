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

:class:`LocalState` (the default) keeps nothing: each replica has only its own memory.
:class:`RedisState` keeps the copies in Redis through the ``redis`` client library. A store
that fails (Redis down, a timeout) is never the agent's failure: the request goes on as if
no copy were kept (the replica answers from its own memory, in full where it has none).

Sessions of no ``Mcp-Session-Id`` (the sessionless 2026-07-28 protocol) are not stored:
their handles would have to be unguessable and bound to the caller's credential first.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ..errors import ConfigError
from ..proxy.held import Kept, MemoryReport

__all__ = ["LocalState", "RedisState", "SessionState", "Stored", "open_state", "session_key"]

#: Seconds a store operation may take before the request goes on without it.
_TIMEOUT: Final = 2.0
_PREFIX: Final = "gcfkit:session:"


@dataclass(frozen=True, slots=True)
class Stored:
    """One session's stored copy: what it remembers, the handles issued for it (never to
    be issued again), and the ``stamp`` of the write (a new one each write)."""

    memory: MemoryReport
    spent: tuple[str, ...]
    stamp: str


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

    async def save(self, session_id: str, memory: MemoryReport, spent: Sequence[str]) -> str:
        """Write the session's copy (bounded, with the expiry); returns its stamp."""
        ...

    async def drop(self, session_id: str) -> None:
        """The session ended (a DELETE): its copy goes."""
        ...

    async def aclose(self) -> None: ...


class LocalState:
    """No store: each replica keeps its sessions in its own memory only (the default)."""

    shared = False

    async def stamp(self, session_id: str) -> str | None:
        return None

    async def load(self, session_id: str) -> Stored | None:
        return None

    async def save(self, session_id: str, memory: MemoryReport, spent: Sequence[str]) -> str:
        return ""

    async def drop(self, session_id: str) -> None:
        return None

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


def _encode(memory: MemoryReport, spent: Sequence[str]) -> str:
    kept = [[k.handle, k.tool, k.args, k.kind, k.text, k.size, k.depth] for k in memory.new]
    body = {
        "order": list(memory.order),
        "new": kept,
        "latest": memory.latest,
        "unasked": memory.unasked,
        "spent": list(spent),
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _decode(text: str | bytes, stamp: str) -> Stored | None:
    try:
        body = json.loads(text)
        new = tuple(
            Kept(str(h), str(t), str(a), "json" if k == "json" else "text", str(x), int(s), int(d))
            for h, t, a, k, x, s, d in body["new"]
        )
        memory = MemoryReport(
            tuple(str(h) for h in body["order"]),
            new,
            {str(c): str(h) for c, h in body["latest"].items()},
            {str(c): int(n) for c, n in body["unasked"].items()},
        )
        return Stored(memory, tuple(str(h) for h in body["spent"]), stamp)
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

    def __init__(self, url: str, *, max_bytes: int, ttl: float) -> None:
        try:
            import redis.asyncio as aioredis
        except ImportError as e:  # pragma: no cover - the mcp extra installs it
            raise ConfigError(
                "invalid_option", "--state redis://... needs the redis library: gcfkit[mcp]"
            ) from e
        self.max_bytes = max_bytes
        self.ttl = max(1, math.ceil(ttl))
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

    async def save(self, session_id: str, memory: MemoryReport, spent: Sequence[str]) -> str:
        stamp = secrets.token_hex(8)
        data = _encode(bounded(memory, self.max_bytes), spent)
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

    async def aclose(self) -> None:
        with contextlib.suppress(*self._errors):
            await self._client.aclose()


def open_state(url: str | None, *, max_bytes: int, ttl: float) -> SessionState:
    """The store ``--state URL`` names (None: :class:`LocalState`).

    >>> type(open_state(None, max_bytes=1, ttl=1)).__name__
    'LocalState'
    >>> try:
    ...     open_state("memcached://x", max_bytes=1, ttl=1)
    ... except ConfigError as e:
    ...     print(e.code)
    invalid_option
    """
    if url is None:
        return LocalState()
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(
            "invalid_option", "--state: expected redis://HOST:PORT/DB (or rediss://, unix://)"
        )
    return RedisState(url, max_bytes=max_bytes, ttl=ttl)
