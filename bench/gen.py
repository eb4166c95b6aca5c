"""Deterministic large inputs for the speed and memory benchmarks: about 10 MB of JSON each.

``flat(seed)`` is a list of flat 10-field records (tabular data: ids, names, emails,
enums, numbers, booleans, dates); ``nested(seed)`` a list of orders, each with a nested
customer and address, an items array, tags and an optional coupon. The same seed gives the
same value on every machine and Python version (only ``random.Random``'s documented
integer and choice methods are used).

``python bench/gen.py DIR`` writes ``flat10.json`` and ``nested10.json`` into DIR.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

SEED = 20261201
TARGET_BYTES = 10_000_000

_FIRST = ["Ada", "Lin", "Grace", "Alan", "Edsger", "Barbara", "Ken", "Dennis", "Margaret",
          "Donald", "Frances", "John", "Radia", "Tim", "Sophie", "Guido", "Bjarne", "Niklaus",
          "Jean", "Hedy", "Katherine", "Annie", "Évariste", "Zoë"]  # fmt: skip
_LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Thompson", "Ritchie",
         "Hamilton", "Knuth", "Allen", "McCarthy", "Perlman", "Berners-Lee", "Wilson",
         "van Rossum", "Stroustrup", "Wirth", "Sammet", "Lamarr", "Johnson", "Easley",
         "Galois", "Müller", "O'Brien"]  # fmt: skip
_DEPARTMENTS = ["Engineering", "Sales", "Marketing", "HR", "Operations", "Finance", "Legal"]
_CITIES = ["Lisbon", "Kyoto", "Oslo", "Nairobi", "Quito", "Tallinn", "Montréal", "São Paulo"]
_COUNTRIES = ["PT", "JP", "NO", "KE", "EC", "EE", "CA", "BR"]
_PRODUCTS = ["Wireless Mouse", "USB Cable", "Laptop Stand", "Keyboard", "Monitor 27\"",
             "Headset, noise-cancelling", "Webcam", "Desk Lamp"]  # fmt: skip
_STATUSES = ["pending", "processing", "shipped", "delivered", "cancelled"]
_TAGS = ["gift", "express", "fragile", "bulk", "priority", "eco"]


def _name(rng: random.Random) -> str:
    return f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"


def _date(rng: random.Random) -> str:
    return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _money(rng: random.Random, low: int, high: int) -> float:
    return rng.randint(low * 100, high * 100) / 100


def _flat_record(rng: random.Random, i: int) -> dict[str, Any]:
    name = _name(rng)
    return {
        "id": i + 1,
        "name": name,
        "email": f"{name.split()[0].lower()}.{i}@example.com",
        "department": rng.choice(_DEPARTMENTS),
        "salary": rng.randint(40_000, 180_000),
        "score": rng.randint(0, 10_000) / 100,
        "active": rng.random() < 0.8,
        "joined": _date(rng),
        "manager": None if rng.random() < 0.2 else rng.randint(1, 500),
        "level": rng.choice(["junior", "mid", "senior", "staff", "principal"]),
    }


def _order(rng: random.Random, i: int) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {
            "sku": f"SKU-{rng.randint(0, 999_999):06d}",
            "name": rng.choice(_PRODUCTS),
            "quantity": rng.randint(1, 5),
            "price": _money(rng, 5, 400),
        }
        for _ in range(rng.randint(1, 5))
    ]
    subtotal = round(sum(it["quantity"] * it["price"] for it in items), 2)
    order: dict[str, Any] = {
        "orderId": f"ORD-{i + 1:06d}",
        "customer": {
            "id": rng.randint(1, 100_000),
            "name": _name(rng),
            "address": {"city": rng.choice(_CITIES), "country": rng.choice(_COUNTRIES)},
        },
        "items": items,
        "subtotal": subtotal,
        "tax": round(subtotal * 0.08, 2),
        "status": rng.choice(_STATUSES),
        "tags": rng.sample(_TAGS, rng.randint(0, 3)),
        "orderDate": _date(rng),
    }
    if rng.random() < 0.3:
        order["coupon"] = {"code": f"SAVE{rng.randint(5, 50)}", "percent": rng.randint(5, 50)}
    return order


def _grow(make: Any, seed: int, target: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    size = 2
    while size < target:
        record = make(rng, len(out))
        size += len(json.dumps(record, ensure_ascii=False, separators=(",", ":"))) + 1
        out.append(record)
    return out


def flat(seed: int = SEED, target: int = TARGET_BYTES) -> list[dict[str, Any]]:
    """Flat records until their compact JSON reaches ``target`` bytes."""
    return _grow(_flat_record, seed, target)


def nested(seed: int = SEED, target: int = TARGET_BYTES) -> list[dict[str, Any]]:
    """Orders with nested objects and arrays until their compact JSON reaches ``target``."""
    return _grow(_order, seed + 1, target)


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    for name, value in (("flat10", flat()), ("nested10", nested())):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        (out / f"{name}.json").write_text(text, encoding="utf-8")
        print(f"{name}.json: {len(value):,} records, {len(text.encode()):,} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
