"""The decorator's signature surgery: a tool function made into one whose result a
:class:`~gcfkit.mcp.server.GCFResponder` answers, with the arguments it adds (``format``,
``pack_root``, ``_since``, a ``Context``) in its signature and MCPServer's own output schema.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, Protocol

import anyio
import pydantic_core
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata, func_metadata
from mcp_types import CallToolResult
from pydantic import Field

from ..answers.since import SINCE_ARGUMENT
from ..graph import Graph
from .sdk import ToolContext

__all__ = ["Respond", "ToolOptions", "jsonable", "wrap_tool"]


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """What :meth:`GCFResponder.tool <gcfkit.mcp.server.GCFResponder.tool>` was asked for one
    tool: a ``delta_key`` (§10a deltas), the names of the arguments it adds, the dense
    constructs it may use and whether it gives relative answers.

    >>> ToolOptions().format_arg
    'format'
    """

    delta_key: str | None = None
    format_arg: str = "format"
    pack_root_arg: str = "pack_root"
    dense: bool | tuple[str, ...] = False
    relative: bool = False


class Respond(Protocol):
    """:meth:`GCFResponder.respond <gcfkit.mcp.server.GCFResponder.respond>`, as the
    wrapper calls it."""

    def __call__(
        self,
        data: Any,
        ctx: ToolContext,
        *,
        format: str | None = None,
        structured: Mapping[str, Any] | None = None,
        delta_key: str | None = None,
        pack_root: str | None = None,
        call_key: str = "",
        dense: bool | tuple[str, ...] = False,
        relative: bool = False,
        since: str | None = None,
    ) -> CallToolResult: ...


def jsonable(value: Any) -> Any:
    """``value`` as JSON data (pydantic models and the like converted; JSON types as they
    are).

    >>> jsonable({"a": (1, 2)})
    {'a': (1, 2)}
    """
    if value is None or isinstance(value, (str, int, float, bool, list, dict)):
        return value
    return pydantic_core.to_jsonable_python(value)


def wrap_tool(
    respond: Respond, fn: Callable[..., Any], options: ToolOptions
) -> Callable[..., Awaitable[CallToolResult]]:
    """``fn`` as a tool whose result ``respond`` answers as negotiated: its signature
    gains the arguments ``options`` asks for (``format``; ``pack_root`` with a
    ``delta_key``; ``_since`` when ``relative``; a ``Context`` when it has none), its
    output schema stays the one MCPServer derives for ``fn``."""
    delta_key, format_arg, pack_root_arg = (
        options.delta_key,
        options.format_arg,
        options.pack_root_arg,
    )
    dense, relative = options.dense, options.relative
    sig = inspect.signature(fn, eval_str=True)
    hints = typing.get_type_hints(fn, include_extras=True)
    ctx_name = _context_parameter(sig, hints)
    params = list(sig.parameters.values())
    taken = {p.name for p in params}
    added: list[inspect.Parameter] = []
    for arg, wanted in ((format_arg, True), (pack_root_arg, delta_key is not None)):
        if wanted and arg in taken:
            raise TypeError(
                f"{fn.__name__} already has a parameter {arg!r}; pass "
                f"{'format_arg' if arg == format_arg else 'pack_root_arg'}=... to gcf_tool "
                "to name the added argument differently"
            )
    added.append(
        inspect.Parameter(
            format_arg,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=_FORMAT_ANNOTATION,
        )
    )
    if delta_key is not None:
        added.append(
            inspect.Parameter(
                pack_root_arg,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=_PACK_ROOT_ANNOTATION,
            )
        )
    since_name = "gcf_since"
    if relative:
        if SINCE_ARGUMENT in taken:
            raise TypeError(f"{fn.__name__} already has a parameter {SINCE_ARGUMENT!r}")
        while since_name in taken:
            since_name += "_"
        added.append(
            inspect.Parameter(
                since_name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=_SINCE_ANNOTATION,
            )
        )
    added_ctx = ctx_name is None
    if ctx_name is None:
        ctx_name = "gcf_context"
        while ctx_name in taken:
            ctx_name += "_"
        added.append(
            inspect.Parameter(
                ctx_name,
                inspect.Parameter.KEYWORD_ONLY,
                default=None,
                annotation=Context | None,
            )
        )
    # Keyword-only parameters must precede **kwargs.
    tail = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
    head = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    new_sig = sig.replace(parameters=[*head, *added, *tail])
    annotations = {p.name: p.annotation for p in new_sig.parameters.values()}
    annotations["return"] = sig.return_annotation
    if sig.return_annotation is inspect.Signature.empty:
        del annotations["return"]

    # The same output schema MCPServer derives for the undecorated function.
    meta: FuncMetadata = func_metadata(fn, skip_names=[ctx_name] if not added_ctx else [])
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )
    context_name = ctx_name

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
        ctx = kwargs.pop(context_name, None) if added_ctx else kwargs.get(context_name)
        fmt = kwargs.pop(format_arg, None)
        echoed = kwargs.pop(pack_root_arg, None) if delta_key is not None else None
        # The SDK passes the argument by its alias (_since); a direct call by name.
        since = kwargs.pop(SINCE_ARGUMENT, None) if relative else None
        since = kwargs.pop(since_name, since) if relative else None
        if is_async:
            result = await fn(*args, **kwargs)
        else:
            result = await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
        if isinstance(result, CallToolResult):
            return result
        structured = None
        value = result
        if meta.output_schema is not None:
            converted = meta.convert_result(result)
            if isinstance(converted, CallToolResult) and converted.structured_content is not None:
                structured = converted.structured_content
                if not isinstance(result, Graph):
                    value = structured["result"] if meta.wrap_output else structured
        call_key = ""
        if delta_key is not None or relative:
            plain = {k: v for k, v in kwargs.items() if k != context_name}
            call_key = json.dumps(jsonable(plain), sort_keys=True, default=str)
        return respond(
            value,
            ctx,
            format=fmt,
            structured=structured,
            delta_key=delta_key,
            pack_root=echoed,
            call_key=call_key,
            dense=dense,
            relative=relative,
            since=since,
        )

    wrapper.__signature__ = new_sig  # type: ignore[attr-defined]
    wrapper.__annotations__ = annotations
    return wrapper


_FORMAT_ANNOTATION: Final = Annotated[
    Literal["gcf", "json"] | None,
    Field(
        description="Output format of this call's result: 'gcf' (GCF, fewer tokens) or "
        "'json'. Default: the session's negotiated format."
    ),
]
_SINCE_ANNOTATION: Final = Annotated[
    str | None,
    Field(
        alias=SINCE_ARGUMENT,
        description="The ref= of this call's earlier result that you still hold, to get only "
        "what changed (@@ unchanged, or an @@ patch of op|path|value rows to apply to it).",
    ),
]
_PACK_ROOT_ANNOTATION: Final = Annotated[
    str | None,
    Field(
        description="The pack_root of your previous result for these same arguments; if "
        "given, only what changed since then is sent (GCF delta, spec §10a)."
    ),
]


def _context_parameter(sig: inspect.Signature, hints: Mapping[str, Any]) -> str | None:
    for name in sig.parameters:
        ann = hints.get(name)
        candidates = (ann, *typing.get_args(ann)) if ann is not None else ()
        for c in candidates:
            if inspect.isclass(c) and issubclass(c, Context):
                return name
    return None
