"""The worker pools the shells run (:mod:`gcfkit.transports.offload`), made and started
one way: lazily. No worker runs at the proxy's start; all but big results are answered in
the relay's process (:mod:`gcfkit.transports.local`, whose tokenizer is loaded in a thread
at the start), the first result that needs a worker starts one, and a worker idle for
:data:`~gcfkit.transports.offload.IDLE_EXIT` seconds exits.

>>> from gcfkit.proxy.config import ProxyConfig
>>> pool = session_pool(ProxyConfig(), None, None)
>>> pool.min_workers, pool.here is not None
(0, True)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..proxy.config import Codec, ProxyConfig
from ..proxy.core import ProxyCore
from .offload import MAX_WORKERS, Offload

__all__ = ["server_pool", "session_pool", "start_or_warm", "start_pool"]


def session_pool(
    config: ProxyConfig, codec: Codec | None, ledger_path: Path | str | None
) -> Offload:
    """The pool of a shell with one session (stdio, ``--upstream``): one worker at most,
    none until a result needs it; small results answered in process unless ``codec`` is
    given (a codec of the caller's runs in workers only); the ledger at ``ledger_path``."""
    return Offload(config, codec, ledger_path=ledger_path, workers=0, in_process=True)


def server_pool(
    config: ProxyConfig, codec: Codec | None = None, ledger_path: Path | str | None = None
) -> Offload:
    """The pool of a server of many sessions (the HTTP shells): :data:`MAX_WORKERS` at
    most, none until a result needs one; its workers append their records to
    ``ledger_path``."""
    return Offload(
        config,
        codec,
        ledger_path=ledger_path,
        workers=0,
        max_workers=MAX_WORKERS,
        in_process=True,
    )


async def start_or_warm(offload: Offload, core: ProxyCore) -> asyncio.Future[None]:
    """Make ready ``offload`` (its workers start when a result needs one), for a shell with
    one session; when none can ever start (the options or codec do not pickle), results
    are rewritten in the event loop, so ``core`` warms up in a thread meanwhile. Returns
    what the first such rewrite waits for (done at once when the pool runs)."""
    loop = asyncio.get_running_loop()
    if await offload.start():
        if offload.here is not None:
            # The relay answers most results: its tokenizer (~140 ms to build) is loaded
            # while the server starts, not on the first result.
            return loop.run_in_executor(None, offload.here.warm_up)
        done: asyncio.Future[None] = loop.create_future()
        done.set_result(None)
        return done
    return loop.run_in_executor(None, core.warm_up)


async def start_pool(offload: Offload) -> None:
    """Make ready ``offload`` (its workers start when a result needs one). When none can
    ever start, results are rewritten in the event loop, so the tokenizer is loaded now,
    in a thread, and the first result is not charged for it."""
    if not await offload.start():
        warm = ProxyCore(offload.config, offload.codec).warm_up
        await asyncio.get_running_loop().run_in_executor(None, warm)
    elif offload.here is not None:
        await asyncio.get_running_loop().run_in_executor(None, offload.here.warm_up)
