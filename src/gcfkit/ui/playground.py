"""What the playground shows: one value in every format, with the numbers of ``gcfkit stats``.

:func:`analyze` takes what was pasted: JSON (strict: duplicate keys and NaN are errors), or a
GCF payload, which is decoded to its JSON value first (a graph to its JSON model). The value
is then measured by :func:`gcfkit.measure.report.compare_formats`, the comparison behind
``gcfkit stats FILE``, with GCF with extensions added, so the page and the command line show
the same numbers. Bad input is a :class:`PlaygroundError` with the spec's error code and
line, never a traceback.

>>> out = analyze('[{"id": 1, "name": "Ada"}, {"id": 2, "name": "Lin"}]')
>>> [f["format"] for f in out["formats"]]
['json-pretty', 'json-compact', 'toon', 'gcx1', 'gcf', 'gcf-ext']
>>> gcf = next(f for f in out["formats"] if f["format"] == "gcf")
>>> print(gcf["text"], end="")
GCF profile=generic
## [2]{id,name}
1|Ada
2|Lin
>>> analyze(gcf["text"])["input"]["kind"]
'gcf'
>>> analyze('{"a": 1,}')
Traceback (most recent call last):
gcfkit.ui.playground.PlaygroundError: error[invalid_json] line 1: ...
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from .. import decode, tokens
from ..answers.choose import utf8_len
from ..errors import GCFError
from ..header import DENSE_MAGIC, dense_header
from ..jsonio import loads_json, to_json_model
from ..measure.report import compare_formats, default_formats

__all__ = ["MAX_INPUT_BYTES", "Example", "PlaygroundError", "analyze", "example_text", "examples"]

#: The most the playground measures at once (the page says so; the command line has no limit).
MAX_INPUT_BYTES: Final = 2 * 1024 * 1024

_EXAMPLES: Final = Path(__file__).resolve().parent / "examples"


class PlaygroundError(ValueError):
    """Input the playground cannot measure: ``code`` (the spec's category, or ``invalid_json``,
    ``empty``, ``too_large``), a message, and the 1-based ``line`` when known."""

    def __init__(self, code: str, message: str, line: int | None = None) -> None:
        self.code = code
        self.message = message
        self.line = line
        where = f" line {line}" if line is not None else ""
        super().__init__(f"error[{code}]{where}: {message}")

    def to_dict(self) -> dict[str, Any]:
        """The error as the API sends it."""
        return {"code": self.code, "message": self.message, "line": self.line}


def _value_of(text: str) -> tuple[Any, str, str | None]:
    """(JSON value, input kind, GCF profile) of the pasted text."""
    head = text.lstrip("\ufeff \t\r\n")
    if head.startswith(("GCF ", "@@ ", DENSE_MAGIC)):
        first = head.split("\n", 1)[0].rstrip("\r")
        profile = "dense" if dense_header(first) else first.split(" ")[1].removeprefix("profile=")
        try:
            decoded = decode(head)
        except GCFError as e:
            raise PlaygroundError(e.code, e.detail, e.line) from None
        from .. import graph

        if isinstance(decoded, graph.Graph):
            return graph.graph_to_model(decoded), "gcf", profile
        try:
            return to_json_model(decoded), "gcf", profile
        except (GCFError, TypeError, ValueError) as e:
            raise PlaygroundError(
                "unsupported_shape", f"this payload has no single JSON value ({e})"
            ) from None
    try:
        return loads_json(text), "json", None
    except GCFError as e:
        raise PlaygroundError("invalid_json", e.detail, e.line) from None
    except (ValueError, RecursionError) as e:
        raise PlaygroundError("invalid_json", str(e)) from None


def analyze(text: str) -> dict[str, Any]:
    """Measure pasted JSON (or GCF) in every format; a JSON-ready dict for the page."""
    size = utf8_len(text)
    if not text.strip():
        raise PlaygroundError("empty", "paste JSON (or GCF) to measure it")
    if size > MAX_INPUT_BYTES:
        raise PlaygroundError(
            "too_large",
            f"{size:,} bytes; the playground measures up to {MAX_INPUT_BYTES:,} "
            "(gcfkit stats FILE has no limit)",
        )
    value, kind, profile = _value_of(text)
    # The same formats as `gcfkit stats` (the GCX1 header names the same tool), plus one.
    cmp = compare_formats(value, formats=default_formats(extensions=True))
    data = cmp.to_dict()
    for entry, result in zip(data["formats"], cmp.results, strict=True):
        entry["text"] = result.text
    best = cmp.best_lossless(tokens.DEFAULT_ENCODING)
    data["best_lossless"] = best.name if best is not None else None
    data["input"] = {"kind": kind, "profile": profile, "bytes": size}
    if kind == "gcf":
        data["decoded"] = json.dumps(value, ensure_ascii=False, indent=2)
    return data


# ---------------------------------------------------------------------------------------
# Bundled examples
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """A bundled example: one real tool result from the project's MCP corpus."""

    id: str
    title: str
    source: str


@cache
def examples() -> tuple[Example, ...]:
    """The bundled examples, in the order the page lists them.

    >>> examples()[0].id
    'memory-read-graph'
    """
    index = json.loads((_EXAMPLES / "index.json").read_text(encoding="utf-8"))
    return tuple(Example(e["id"], e["title"], e["source"]) for e in index)


def example_text(example_id: str) -> str | None:
    """The JSON text of the bundled example ``example_id`` (None if there is none).

    >>> example_text("time-convert")[:1], example_text("../etc/passwd")
    ('{', None)
    """
    if example_id not in {e.id for e in examples()}:
        return None
    return (_EXAMPLES / f"{example_id}.json").read_text(encoding="utf-8")
