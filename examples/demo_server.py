#!/usr/bin/env python3
"""A small MCP server for demos and tests: stdlib only, newline-delimited JSON-RPC on stdio.

Its tools return the shapes real servers return:

* ``list_orders``: an order book (records with nested customers and line items);
* ``search``: ranked search hits (a flat record array), with progress notifications;
* ``report``: a nested report object;
* ``hello``: plain (non-JSON) text;
* ``fail``: an ``isError`` result;
* ``inventory``: one JSON object per content block (for the cross-block join);
* ``stock``: a keyed set that changes a little on each call (for ``--delta``);
* ``ask_roots``: asks the client for its roots (a server-to-client request);
* ``crash``: exits mid-call without answering (for shutdown tests).

With ``--root DIR`` it also offers ``read_text_file`` and ``edit_file`` on files under DIR,
where an edit must quote a line exactly as it is on disk, as real file servers require.

Run it behind the proxy:  gcfkit proxy -- python examples/demo_server.py
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

_CUSTOMERS = [
    {"id": "c-17", "name": "Ada Lovelace", "tier": "gold"},
    {"id": "c-23", "name": "Grace Hopper", "tier": "silver"},
    {"id": "c-42", "name": "Alan Turing", "tier": "gold"},
    {"id": "c-51", "name": "Edsger Dijkstra", "tier": "bronze"},
]
_PRODUCTS = [
    ("SKU-100", "USB-C cable", 9.99),
    ("SKU-205", "Mechanical keyboard", 89.5),
    ("SKU-310", "27in monitor", 249.0),
    ("SKU-415", "Laptop stand", 34.25),
    ("SKU-520", "Noise-cancelling headphones", 199.99),
]
_STATUSES = ("pending", "paid", "shipped", "delivered")


def orders(count: int) -> list[dict[str, Any]]:
    """A deterministic order book of ``count`` orders."""
    out = []
    for i in range(count):
        customer = _CUSTOMERS[i % len(_CUSTOMERS)]
        items: list[dict[str, Any]] = []
        for j in range(1 + i % 3):
            sku, title, price = _PRODUCTS[(i + j) % len(_PRODUCTS)]
            items.append({"sku": sku, "title": title, "qty": 1 + (i + j) % 2, "price": price})
        total = round(sum(it["qty"] * it["price"] for it in items), 2)
        out.append(
            {
                "id": 1000 + i,
                "status": _STATUSES[i % len(_STATUSES)],
                "customer": dict(customer),
                "items": items,
                "total": total,
                "currency": "EUR",
                "created_at": f"2026-11-{1 + i % 28:02d}T{8 + i % 10:02d}:15:00Z",
                "gift": i % 7 == 0,
                "note": None if i % 5 else "leave at the door",
            }
        )
    return out


def search(query: str) -> dict[str, Any]:
    hits = [
        {
            "rank": r + 1,
            "path": f"src/shop/{name}.py",
            "line": 10 + 7 * r,
            "score": round(0.98 - r * 0.07, 2),
            "snippet": f"def {name}_{query}(order): ...",
        }
        for r, name in enumerate(["orders", "billing", "shipping", "customers", "refunds", "tax"])
    ]
    return {"query": query, "total": len(hits), "hits": hits}


def report() -> dict[str, Any]:
    return {
        "title": "Q4 sales",
        "generated": "2026-11-30T12:00:00Z",
        "summary": {"orders": 412, "revenue": 48210.75, "refunds": 3, "currency": "EUR"},
        "regions": [
            {"name": "north", "orders": 120, "revenue": 14210.5, "top": ["SKU-205", "SKU-100"]},
            {"name": "south", "orders": 98, "revenue": 11020.0, "top": ["SKU-310"]},
            {"name": "east", "orders": 101, "revenue": 12100.25, "top": ["SKU-520", "SKU-415"]},
            {"name": "west", "orders": 93, "revenue": 10880.0, "top": []},
        ],
        "flags": {"audited": True, "final": False, "reviewer": None},
    }


def stock(turn: int) -> list[dict[str, Any]]:
    rows = []
    for i, (sku, title, price) in enumerate(_PRODUCTS * 4):
        rows.append(
            {
                "id": f"{sku}-{i}",
                "title": title,
                "warehouse": ("AMS", "BER", "WAW")[i % 3],
                "on_hand": 40 + (i * 7) % 23 - (turn if i == turn % 20 else 0),
                "price": price,
            }
        )
    return rows


TOOLS: list[dict[str, Any]] = [
    {
        "name": "list_orders",
        "description": "List recent orders.",
        "inputSchema": {
            "type": "object",
            "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 200}},
        },
    },
    {
        "name": "search",
        "description": "Search the code base.",
        "inputSchema": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
    {"name": "report", "description": "The sales report.", "inputSchema": {"type": "object"}},
    {
        "name": "hello",
        "description": "Say hello (plain text).",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
    {"name": "fail", "description": "Always fails.", "inputSchema": {"type": "object"}},
    {
        "name": "inventory",
        "description": "Stock per warehouse, one block per warehouse.",
        "inputSchema": {"type": "object"},
    },
    {"name": "stock", "description": "Stock levels (changes).", "inputSchema": {"type": "object"}},
    {
        "name": "create_orders",
        "description": "Create orders; returns how many were created.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "orders": {"type": "array", "items": {"type": "object"}},
                "memo": {"type": "string"},
            },
        },
    },
    {
        "name": "ask_roots",
        "description": "List the client's roots.",
        "inputSchema": {"type": "object"},
    },
    {"name": "crash", "description": "Exit without answering.", "inputSchema": {"type": "object"}},
]

FILE_TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_text_file",
        "description": "Read a text file.",
        "inputSchema": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    {
        "name": "edit_file",
        "description": "Replace oldText (must match exactly) with newText.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "oldText": {"type": "string"},
                "newText": {"type": "string"},
            },
            "required": ["path", "oldText", "newText"],
        },
    },
]


class Server:
    def __init__(self, root: str | None) -> None:
        self.root = os.path.realpath(root) if root else None
        self.stock_turn = 0
        self.next_id = 0
        # server-to-client request id -> the tools/call id waiting for its answer
        self.waiting: dict[Any, Any] = {}

    def send(self, msg: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()

    def text_result(self, texts: list[str], is_error: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = {"content": [{"type": "text", "text": t} for t in texts]}
        if is_error:
            result["isError"] = True
        return result

    def path(self, raw: str) -> str:
        assert self.root is not None
        full = os.path.realpath(os.path.join(self.root, raw))
        if not full.startswith(self.root + os.sep):
            raise ValueError(f"access denied: {raw}")
        return full

    def call(self, msg_id: Any, name: str, args: dict[str, Any], meta: Any) -> None:
        if name == "list_orders":
            limit = int(args.get("limit", 12))
            self.reply(msg_id, self.text_result([json.dumps(orders(limit), indent=2)]))
        elif name == "search":
            token = meta.get("progressToken") if isinstance(meta, dict) else None
            if token is not None:
                for step in (1, 2):
                    self.send(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": step, "total": 2},
                        }
                    )
            text = json.dumps(search(str(args.get("query", ""))), indent=2)
            self.reply(msg_id, self.text_result([text]))
        elif name == "report":
            self.reply(msg_id, self.text_result([json.dumps(report(), indent=2)]))
        elif name == "hello":
            who = args.get("name", "world")
            self.reply(msg_id, self.text_result([f"Hello, {who}! Orders ship daily at 17:00."]))
        elif name == "fail":
            body = json.dumps({"error": "warehouse offline", "retry_after": 30}, indent=2)
            self.reply(msg_id, self.text_result([body], is_error=True))
        elif name == "inventory":
            blocks = [
                json.dumps({"warehouse": w, "sku": s, "on_hand": n, "reserved": r})
                for w, s, n, r in [
                    ("AMS", "SKU-100", 140, 12),
                    ("BER", "SKU-100", 95, 3),
                    ("WAW", "SKU-205", 41, 0),
                    ("AMS", "SKU-310", 18, 2),
                ]
            ]
            self.reply(msg_id, self.text_result(blocks))
        elif name == "stock":
            self.stock_turn += 1
            self.reply(msg_id, self.text_result([json.dumps(stock(self.stock_turn), indent=2)]))
        elif name == "create_orders":
            given = args.get("orders")
            if not isinstance(given, list):
                self.reply(msg_id, self.text_result(["orders must be an array"], is_error=True))
            else:
                self.reply(msg_id, self.text_result([f"created {len(given)} orders"]))
        elif name == "ask_roots":
            self.next_id += 1
            req_id = f"srv-{self.next_id}"
            self.waiting[req_id] = msg_id
            self.send({"jsonrpc": "2.0", "id": req_id, "method": "roots/list"})
        elif name == "crash":
            sys.stderr.write("demo_server: crashing on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        elif name in ("read_text_file", "edit_file") and self.root is not None:
            try:
                path = self.path(str(args.get("path", "")))
                with open(path, encoding="utf-8", newline="") as f:
                    text = f.read()
                if name == "read_text_file":
                    self.reply(msg_id, self.text_result([text]))
                    return
                old, new = str(args.get("oldText", "")), str(args.get("newText", ""))
                if not old or old not in text:
                    raise ValueError("oldText not found: it must match the file exactly")
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(text.replace(old, new, 1))
                self.reply(msg_id, self.text_result([f"edited {args.get('path')}"]))
            except (OSError, ValueError) as e:
                self.reply(msg_id, self.text_result([str(e)], is_error=True))
        else:
            self.reply(msg_id, self.text_result([f"unknown tool: {name}"], is_error=True))

    def reply(self, msg_id: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def handle(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        msg_id = msg.get("id")
        if method is None:
            # A response to one of our requests (roots/list).
            waiting = self.waiting.pop(msg_id, None)
            if waiting is not None:
                roots = (msg.get("result") or {}).get("roots", [])
                text = json.dumps([{"uri": r.get("uri"), "name": r.get("name")} for r in roots])
                self.reply(waiting, self.text_result([text]))
            return
        if msg_id is None:
            return  # notifications: initialized, cancelled, ...
        params = msg.get("params") or {}
        if method == "initialize":
            asked = params.get("protocolVersion")
            version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
            self.reply(
                msg_id,
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": "gcfkit-demo", "version": "1.0"},
                    "instructions": "Order desk demo: orders, search, reports.",
                },
            )
        elif method == "ping":
            self.reply(msg_id, {})
        elif method == "tools/list":
            tools = TOOLS + (FILE_TOOLS if self.root is not None else [])
            self.reply(msg_id, {"tools": tools})
        elif method == "tools/call":
            name = params.get("name", "")
            args = params.get("arguments") or {}
            self.call(msg_id, name, args, params.get("_meta"))
        else:
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": msg_id,
                    "error": {"code": -32601, "message": f"method not found: {method}"},
                }
            )

    def serve(self) -> None:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                self.send(
                    {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}}
                )
                continue
            for item in msg if isinstance(msg, list) else [msg]:
                if isinstance(item, dict):
                    self.handle(item)


def main(argv: list[str]) -> int:
    root = None
    if len(argv) >= 2 and argv[0] == "--root":
        root = argv[1]
    Server(root).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
