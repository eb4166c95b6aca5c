"""The shells' road for a line the server wrote: the core receives it
(:meth:`ProxyCore.receive_server <gcfkit.proxy.core.ProxyCore.receive_server>`), a tool
result is rewritten in the worker pool (:mod:`gcfkit.transports.offload`) or, when no worker
could ever start, here, by the same code (:meth:`ProxyCore.from_server
<gcfkit.proxy.core.ProxyCore.from_server>`), and the core finishes it
(:meth:`ProxyCore.finish <gcfkit.proxy.core.ProxyCore.finish>`), with the original and the
reason in the ledger when no answer comes.

:func:`receive` and :func:`rewrite_job` are the two halves, for a stream that keeps other
lines flowing meanwhile (:class:`~gcfkit.transports.outbox.Outbox`); :func:`relay_one` is
both at once, for a stream that carries one message.

>>> import asyncio
>>> from gcfkit.proxy.core import ProxyConfig, ProxyCore
>>> core = ProxyCore(ProxyConfig(primer=False))
>>> _ = core.from_client(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
>>> asyncio.run(relay_one(core, None, b'{"jsonrpc":"2.0","id":1,"result":{}}'))[0].data
b'{"jsonrpc":"2.0","id":1,"result":{}}'
"""

from __future__ import annotations

from ..proxy.core import Output, ProxyCore, ToolJob
from ..proxy.rewrite import SessionEvent
from .offload import Lane, OffloadFailed

__all__ = ["receive", "relay_one", "rewrite_job", "rewrite_now", "submit_job"]


def receive(core: ProxyCore, lane: Lane | None, line: bytes) -> list[Output] | ToolJob:
    """The core's answer to one line the server wrote: a :class:`ToolJob` to :func:`rewrite_job`
    when ``lane`` can rewrite it in the pool; without one (no worker could start), the
    result is rewritten here, at once (:meth:`ProxyCore.from_server`); after the pool's
    workers kept dying (:attr:`~gcfkit.transports.offload.Lane.gave_up`), it passes as the
    server wrote it."""
    if lane is not None and lane.available:
        return core.receive_server(line)
    if lane is not None and lane.gave_up:
        got = core.receive_server(line)
        core.pop_events()  # no worker will hold the session's state again
        return core.finish(got, None, failed="workers-crashed") if isinstance(got, ToolJob) else got
    core.pop_events()  # for a worker's state; the core's own needs none
    return core.from_server(line)


def rewrite_now(
    core: ProxyCore, lane: Lane | None, job: ToolJob, events: list[SessionEvent]
) -> list[Output] | None:
    """What to write for ``job`` when it is answered at once, in this process
    (:meth:`Lane.answer_now <gcfkit.transports.offload.Lane.answer_now>`), or when it
    cannot be rewritten at all (the original, the ledger says why); None: it goes to a
    worker (:func:`rewrite_job` with the same ``events``)."""
    if lane is None:
        return core.finish(job, None, failed="no-worker")
    try:
        answered, line = lane.answer_now(job.line, job.call, job.server, events, job.message)
    except OffloadFailed as e:
        return core.finish(job, None, failed=e.reason)
    except Exception as e:  # never break the agent: the original goes out
        return core.finish(job, None, failed="error", detail=type(e).__name__)
    return core.finish(job, line) if answered else None


async def rewrite_job(
    core: ProxyCore, lane: Lane | None, job: ToolJob, events: list[SessionEvent]
) -> list[Output]:
    """What to write for ``job``: its rewrite from ``lane`` (``events``, popped from the
    core when the line arrived, reach the session's state first), or the original when no
    answer comes in time, there is no worker, or anything fails (the ledger says why)."""
    now = rewrite_now(core, lane, job, events)
    return now if now is not None else await submit_job(core, lane, job, events)


async def submit_job(
    core: ProxyCore, lane: Lane | None, job: ToolJob, events: list[SessionEvent]
) -> list[Output]:
    """:func:`rewrite_job` for a job :func:`rewrite_now` left to a worker."""
    if lane is None:
        return core.finish(job, None, failed="no-worker")
    try:
        line = await lane.submit(job.line, job.call, job.server, events)
    except OffloadFailed as e:
        return core.finish(job, None, failed=e.reason)
    except Exception as e:  # never break the agent: the original goes out
        return core.finish(job, None, failed="error", detail=type(e).__name__)
    return core.finish(job, line)


async def relay_one(core: ProxyCore, lane: Lane | None, line: bytes) -> list[Output]:
    """One line the server wrote, answered in full (a tool result rewritten in the pool,
    awaited): for a stream that carries one message at a time and holds nothing else
    behind it (an HTTP response body, one request's SSE stream). Only that stream waits;
    the event loop and every other stream go on meanwhile."""
    got = receive(core, lane, line)
    if isinstance(got, ToolJob):
        return await rewrite_job(core, lane, got, core.pop_events())
    return got
