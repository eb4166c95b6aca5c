"""A stdio MCP server whose tools return ``structuredContent`` in every shape a client meets
(run as ``python tests/structured_server.py``; the tests of :mod:`gcfkit.proxy.structured`
use it, in process through :data:`TOOLS` and :func:`result_of`, and over stdio).

* ``read_graph``: a graph, its text the pretty JSON of it, with an ``outputSchema``;
* ``stats``: the same kind of result without an ``outputSchema``;
* ``read_text_file``: a file read, ``{"content": text}`` (the filesystem server's shape);
* ``search``: a text that only summarises its ``structuredContent``;
* ``chart``: a tool whose results feed a UI (MCP Apps ``_meta.ui``);
* ``fail``: an error that carries ``structuredContent``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

ENTITIES = [
    {
        "name": f"module_{i}",
        "entityType": "module" if i % 3 else "test",
        "observations": [f"defines {i * 7} functions", f"owned by team {i % 4}"],
    }
    for i in range(40)
]
RELATIONS = [
    {"from": f"module_{i}", "to": f"module_{(i * 5) % 40}", "relationType": "imports"}
    for i in range(40)
]
GRAPH = {"entities": ENTITIES, "relations": RELATIONS}
FILE_TEXT = 'def main() -> None:\n    print("héllo, \\"world\\"")\n\tx = {"a": [1, 2]}\n'

_ENTITY_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "entityType": {"type": "string"},
        "observations": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "entityType", "observations"],
}
GRAPH_SCHEMA = {
    "type": "object",
    "properties": {
        "entities": {"type": "array", "items": _ENTITY_SCHEMA},
        "relations": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["entities", "relations"],
}
_NO_ARGS = {"type": "object", "properties": {}}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_graph",
        "description": "Read the whole knowledge graph",
        "inputSchema": _NO_ARGS,
        "outputSchema": GRAPH_SCHEMA,
    },
    {"name": "stats", "description": "Counts per entity type", "inputSchema": _NO_ARGS},
    {
        "name": "read_text_file",
        "description": "Read a file's contents as text",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "outputSchema": {
            "type": "object",
            "properties": {"content": {"type": "string"}},
            "required": ["content"],
        },
    },
    {
        "name": "search",
        "description": "Search the graph",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
        "outputSchema": {"type": "object", "properties": {"hits": {"type": "array"}}},
    },
    {
        "name": "chart",
        "description": "Chart the graph in the host's UI",
        "inputSchema": _NO_ARGS,
        "outputSchema": GRAPH_SCHEMA,
        "_meta": {"ui": {"resourceUri": "ui://structured/chart.html"}},
    },
    {"name": "fail", "description": "Always fails", "inputSchema": _NO_ARGS},
]


def result_of(tool: str) -> dict[str, Any]:
    """The result the server sends for ``tool``."""
    if tool in ("read_graph", "chart"):
        text = json.dumps(GRAPH, indent=2)
        return {"content": [{"type": "text", "text": text}], "structuredContent": GRAPH}
    if tool == "stats":
        counts = {"module": sum(e["entityType"] == "module" for e in ENTITIES), "test": 14}
        value = {"counts": counts, "total": len(ENTITIES)}
        return {
            "content": [{"type": "text", "text": json.dumps(value)}],
            "structuredContent": value,
        }
    if tool == "read_text_file":
        value = {"content": FILE_TEXT}
        return {"content": [{"type": "text", "text": FILE_TEXT}], "structuredContent": value}
    if tool == "search":
        hits = [e for e in ENTITIES if e["entityType"] == "test"]
        summary = f"Found {len(hits)} entities."
        return {"content": [{"type": "text", "text": summary}], "structuredContent": {"hits": hits}}
    error = {"code": "validation_error", "field": "args", "expected": "object"}
    return {
        "content": [{"type": "text", "text": "Error [validation_error]: invalid input"}],
        "structuredContent": error,
        "isError": True,
    }


def main() -> int:
    def send(msg: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(msg, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
            continue
        method, msg_id = msg["method"], msg["id"]
        if method == "initialize":
            version = (msg.get("params") or {}).get("protocolVersion", "2025-11-25")
            send(
                {
                    "jsonrpc": "2.0",
                    "id": msg_id,
                    "result": {
                        "protocolVersion": version,
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "structured", "version": "1.0"},
                    },
                }
            )
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": msg_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name = (msg.get("params") or {}).get("name", "")
            send({"jsonrpc": "2.0", "id": msg_id, "result": result_of(name)})
        else:
            send({"jsonrpc": "2.0", "id": msg_id, "result": {}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
