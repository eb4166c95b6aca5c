"""OpenTelemetry traces of the tool results an HTTP shell answers: off unless configured.

Configured the standard way, by the OpenTelemetry environment variables, and sent by the
OpenTelemetry SDK (``pip install 'gcfkit[otel]'``; an optional import, so gcfkit runs without
it): traces are on when ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, ``console``...)
or ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, and not
when ``OTEL_SDK_DISABLED=true`` or the exporter is ``none``. Exporters are found by the
SDK's entry points (``opentelemetry_traces_exporter``); ``otlp`` is the one of
``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` or ``OTEL_EXPORTER_OTLP_PROTOCOL``, by default
``http/protobuf``, as the OpenTelemetry specification says. The service name and resource
come from ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (service ``gcfkit`` when
unnamed); the exporters read their own variables (endpoint, headers, timeout).

One span per tool result, ``tools/call {tool}`` (the tool label of :mod:`.metrics`, so
bounded), covering the result from its arrival at the rewriting pool to its answer, with
the server, the outcome and the added milliseconds; never arguments or content.

>>> spans_from_env({}) is None
True
>>> spans_from_env({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"}) is None
True
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, Final

__all__ = ["Spans", "spans_from_env"]

_ENDPOINTS: Final = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_OTLP_BY_PROTOCOL: Final = {
    "http/protobuf": "otlp_proto_http",
    "grpc": "otlp_proto_grpc",
    "http/json": "otlp_proto_http",
}


class Spans:
    """Where the shell's spans go: a tracer of ``provider`` (an SDK ``TracerProvider``,
    flushed by :meth:`close`)."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("gcfkit")

    def tool_call(self, server: str, tool: str, outcome: str, seconds: float) -> None:
        """The span of one tool result answered ``seconds`` after it arrived (ending now)."""
        end = time.time_ns()
        span = self.tracer.start_span(
            f"tools/call {tool}",
            start_time=end - int(max(seconds, 0.0) * 1e9),
            attributes={
                "mcp.method.name": "tools/call",
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gcfkit.server": server,
                "gcfkit.outcome": outcome,
                "gcfkit.added_ms": round(seconds * 1000.0, 3),
            },
        )
        span.end(end_time=end)

    def close(self) -> None:
        """Send what is still held, and stop."""
        # An exporter that cannot reach its collector must not stop the server.
        with contextlib.suppress(Exception):
            self.provider.shutdown()


def spans_from_env(environ: Mapping[str, str]) -> Spans | None:
    """The spans the OpenTelemetry variables of ``environ`` ask for (see the module
    docstring), or None: not configured, or the SDK is not installed (said once on
    stderr)."""
    names = [n.strip() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if names == ["none"] or (not names and not any(environ.get(v) for v in _ENDPOINTS)):
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        _warn("OpenTelemetry is configured but its SDK is missing: pip install 'gcfkit[otel]'")
        return None
    resource = Resource.create({"service.name": environ.get("OTEL_SERVICE_NAME") or "gcfkit"})
    provider = TracerProvider(resource=resource)
    added = 0
    for name in names or ["otlp"]:
        exporter = _exporter(name, environ)
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter()))
            added += 1
    if not added:
        return None
    return Spans(provider)


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    """The exporter class registered under ``name`` (``otlp``: by the protocol), or None."""
    if name == "otlp":
        protocol = (
            environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        )
        name = _OTLP_BY_PROTOCOL.get(protocol.strip(), "otlp_proto_http")
    found = entry_points(group="opentelemetry_traces_exporter", name=name)
    for entry in found:
        try:
            return entry.load()
        except Exception as e:
            _warn(f"the OpenTelemetry exporter {name!r} cannot be loaded: {e}")
            return None
    _warn(f"no OpenTelemetry traces exporter {name!r} is installed (pip install 'gcfkit[otel]')")
    return None


def _warn(text: str) -> None:
    print(f"gcfkit proxy: {text}", file=sys.stderr, flush=True)
