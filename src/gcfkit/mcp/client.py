"""GCF for MCP clients built on the official SDK: ask servers for an output format.

:func:`with_output_format` wraps an SDK client transport so the session declares the
``output_format`` capability that :mod:`gcfkit.mcp.server` (and the proxy) read.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, cast

from mcp.client import Transport
from mcp.shared.message import SessionMessage
from mcp_types import CLIENT_CAPABILITIES_META_KEY, JSONRPCRequest

from ..proxy.policy import CAPABILITY, OUTPUT_FORMATS, OutputFormat

__all__ = ["with_output_format"]


class _FormatWriteStream:
    def __init__(self, inner: Any, experimental: dict[str, Any]) -> None:
        self._inner = inner
        self._experimental = experimental

    async def send(self, item: SessionMessage, /) -> None:
        msg = item.message
        if isinstance(msg, JSONRPCRequest) and isinstance(msg.params, dict):
            params = dict(msg.params)
            changed = False
            if msg.method == "initialize":
                params["capabilities"] = self._with_format(params.get("capabilities"))
                changed = True
            meta = params.get("_meta")
            if isinstance(meta, dict) and CLIENT_CAPABILITIES_META_KEY in meta:
                meta = dict(meta)
                meta[CLIENT_CAPABILITIES_META_KEY] = self._with_format(
                    meta[CLIENT_CAPABILITIES_META_KEY]
                )
                params["_meta"] = meta
                changed = True
            if changed:
                item = SessionMessage(
                    message=msg.model_copy(update={"params": params}), metadata=item.metadata
                )
        await self._inner.send(item)

    def _with_format(self, caps: Any) -> dict[str, Any]:
        out = dict(caps) if isinstance(caps, dict) else {}
        experimental = dict(out.get("experimental") or {})
        experimental.update(self._experimental)
        out["experimental"] = experimental
        return out

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _FormatWriteStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


class _FormatTransport:
    def __init__(self, inner: Transport, fmt: OutputFormat) -> None:
        self._inner = inner
        self._experimental = {CAPABILITY: {"format": fmt}}

    async def __aenter__(self) -> tuple[Any, Any]:
        read, write = await self._inner.__aenter__()
        return read, _FormatWriteStream(write, self._experimental)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc_val, exc_tb)


def with_output_format(transport: Transport, fmt: OutputFormat = "gcf") -> Transport:
    """Wrap an SDK client transport so the client declares ``output_format`` = ``fmt``.

    The official client sends no ``experimental`` capabilities of its own; this adds
    ``{"output_format": {"format": fmt}}`` to the ``initialize`` request (and to the
    per-request capability envelope of the 2026-07-28 protocol).

    .. code-block:: python

        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command="python", args=["server.py"])
        async with Client(with_output_format(stdio_client(params)), mode="legacy") as c:
            result = await c.call_tool("search", {"query": "auth"})

    Only ``"gcf"`` and ``"json"`` can be asked for:

    >>> with_output_format(object(), "xml")
    Traceback (most recent call last):
    ValueError: fmt must be 'gcf' or 'json', not 'xml'
    """
    if fmt not in OUTPUT_FORMATS:
        raise ValueError(f"fmt must be 'gcf' or 'json', not {fmt!r}")
    return cast(Transport, _FormatTransport(transport, fmt))
