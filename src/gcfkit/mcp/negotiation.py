"""Which output format a call is answered in: the session's declared capability
(``capabilities.experimental.output_format``), a call's own ``format`` argument, or a
default.

>>> negotiated_format(None, "gcf")
'gcf'
"""

from __future__ import annotations

from typing import Final

from ..proxy.policy import CAPABILITY as _CAPABILITY
from ..proxy.policy import OUTPUT_FORMATS, OutputFormat, output_format_capability
from .sdk import ToolContext, request_context

__all__ = [
    "CAPABILITY",
    "FORMATS",
    "OutputFormat",
    "client_output_format",
    "format_value",
    "negotiated_format",
]

#: The key under the client's ``capabilities.experimental`` that names its output format.
CAPABILITY: Final = _CAPABILITY
FORMATS: Final[tuple[OutputFormat, ...]] = OUTPUT_FORMATS


def format_value(raw: object) -> OutputFormat | None:
    """The output format ``raw`` names (``"gcf"``, ``{"format": "gcf"}``...), or None.

    >>> format_value({"format": "gcf"}), format_value("yaml")
    ('gcf', None)
    """
    return output_format_capability({CAPABILITY: raw})


def client_output_format(ctx: ToolContext) -> OutputFormat | None:
    """The output format the client declared for its session, or None if it declared none.

    Read from ``capabilities.experimental.output_format`` of the ``initialize`` request (or,
    on the stateless 2026-07-28 protocol, of the request's capability envelope). Both
    ``{"format": "gcf"}`` and a bare ``"gcf"`` are understood.

    >>> client_output_format(None) is None
    True
    """
    rc = request_context(ctx)
    if rc is None:
        return None
    caps = rc.session.client_capabilities
    experimental = caps.experimental if caps is not None else None
    return output_format_capability(experimental)


def negotiated_format(
    ctx: ToolContext, requested: str | None = None, *, default: OutputFormat = "json"
) -> OutputFormat:
    """The format one call is answered in: the per-call ``requested`` format, else the
    session's declared format, else ``default``.

    >>> negotiated_format(None), negotiated_format(None, "gcf")
    ('json', 'gcf')
    >>> negotiated_format(None, default="gcf")
    'gcf'
    """
    if requested is not None:
        fmt = format_value(requested)
        if fmt is None:
            raise ValueError(f"unknown output format {requested!r}; use 'gcf' or 'json'")
        return fmt
    return client_output_format(ctx) or default
