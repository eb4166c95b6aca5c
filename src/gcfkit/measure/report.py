"""Compare the token cost of one JSON value across formats, with a lossless check each.

:func:`compare_formats` encodes a value as pretty JSON, compact JSON, TOON (when the
optional ``toon-format`` package is installed), GCX1 and GCF, counts bytes and tokens in
each encoding with :mod:`gcfkit.tokens`, decodes every text back and compares it with
the input using :func:`gcfkit.jsonio.same_value`. ``gcfkit stats`` and ``bench/tokens.py`` are built
on it. Nothing here is required by the core codec; TOON is imported lazily.

>>> cmp = compare_formats([{"id": 1, "name": "Ada"}, {"id": 2, "name": "Bob"}])
>>> [r.name for r in cmp.results]
['json-pretty', 'json-compact', 'toon', 'gcx1', 'gcf']
>>> cmp.result("json-compact").lossless
True
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import dense, dumps, gcx1, loads, tokens
from ..answers.choose import utf8_len
from ..errors import GCFError
from ..jsonio import dumps_compact, same_value

__all__ = [
    "Comparison",
    "Format",
    "FormatResult",
    "compare_formats",
    "default_formats",
    "extension_format",
    "measure",
    "saving",
    "toon_codec",
]


# ---------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Format:
    """A text format to measure: how to encode, how to decode, what it promises.

    ``encode`` may raise :class:`GCFError` (``unsupported_shape`` and friends) for a
    value the format cannot carry; the result then records the refusal. ``available``
    False means the format's package is missing (``note`` says which).
    ``key_order`` says whether the format promises to keep object key order; the result
    then records whether it did (``key_order_kept``). Losslessness itself is judged as
    GCF §1.1 defines equality: same types, membership, array order, values.
    """

    name: str
    label: str
    encode: Callable[[Any], str]
    decode: Callable[[str], Any]
    available: bool = True
    note: str = ""
    key_order: bool = True


def _unavailable(*_: Any) -> Any:
    raise RuntimeError("format not available")


def _json_pretty(v: Any) -> str:
    return json.dumps(v, indent=2, ensure_ascii=False)


def toon_codec() -> tuple[Callable[[Any], str], Callable[[str], Any], str] | None:
    """TOON's encode and decode, and a note naming the version, from the optional
    ``toon-format`` package; None when it is not installed. Imported when asked for, so
    nothing else needs the package.

    >>> codec = toon_codec()
    >>> codec is None or codec[2].startswith("toon-format")
    True
    """
    try:
        import toon_format  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        return None
    enc: Callable[[Any], str] = toon_format.encode
    dec: Callable[[str], Any] = toon_format.decode
    return enc, dec, f"toon-format {getattr(toon_format, '__version__', '')}".strip()


def _toon_format() -> Format:
    codec = toon_codec()
    if codec is None:
        return Format(
            "toon",
            "TOON",
            _unavailable,
            _unavailable,
            available=False,
            note="not installed (pip install toon-format)",
        )
    enc, dec, note = codec
    return Format("toon", "TOON", enc, dec, note=note)


def extension_format(encoding: str = tokens.DEFAULT_ENCODING) -> Format:
    """GCF with gcfkit's extensions (the dense profile, ``gcfkit.dense``, docs/extensions/
    dense.md): which strings it defines is chosen by exact counts in ``encoding``.

    >>> fmt = extension_format()
    >>> fmt.name, fmt.label
    ('gcf-ext', 'GCF with extensions')
    >>> fmt.encode({"a": "x y z", "b": "x y z"}).splitlines()[0]
    'GCF-dense'
    """

    def count(text: str) -> int:
        return tokens.count(text, encoding)

    def encode(value: Any) -> str:
        return dense.dumps(value, count=count)

    return Format("gcf-ext", "GCF with extensions", encode, dense.loads, note="dense profile")


def default_formats(tool: str = "stats", *, extensions: bool = False) -> list[Format]:
    """The formats ``gcfkit stats`` compares, in display order; with ``extensions``, GCF with
    gcfkit's extensions last (:func:`extension_format`).

    >>> [f.name for f in default_formats()]
    ['json-pretty', 'json-compact', 'toon', 'gcx1', 'gcf']
    >>> default_formats(extensions=True)[-1].name
    'gcf-ext'
    """
    formats = [
        Format("json-pretty", "JSON (pretty, indent 2)", _json_pretty, json.loads),
        Format("json-compact", "JSON (compact)", dumps_compact, json.loads),
        _toon_format(),
        Format(
            "gcx1",
            "GCX1",
            lambda v: gcx1.dumps(v, tool=tool),
            gcx1.loads,
            note="flat tables only",
            key_order=False,
        ),
        Format("gcf", "GCF (gcfkit)", dumps, loads),
    ]
    if extensions:
        formats.append(extension_format())
    return formats


# ---------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------


@dataclass
class FormatResult:
    """One format's measurement. ``text`` is None when the format was unavailable or
    refused the value (``error`` says why); ``lossless`` is None when not checked."""

    name: str
    label: str
    text: str | None = None
    bytes: int = 0
    tokens: dict[str, int] = field(default_factory=dict)
    lossless: bool | None = None
    error: str | None = None
    note: str = ""
    key_order_kept: bool | None = None

    @property
    def ok(self) -> bool:
        """Encoded and verified lossless."""
        return self.text is not None and self.lossless is True

    def to_dict(self, baseline: FormatResult | None = None) -> dict[str, Any]:
        """JSON-ready form (without the text); savings against ``baseline`` if given."""
        out: dict[str, Any] = {
            "format": self.name,
            "label": self.label,
            "available": self.error is None or self.text is not None,
            "bytes": self.bytes if self.text is not None else None,
            "tokens": dict(self.tokens) if self.text is not None else None,
            "lossless": self.lossless,
            "key_order_kept": self.key_order_kept,
            "error": self.error,
            "note": self.note,
        }
        if baseline is not None and self.text is not None and baseline.text is not None:
            out["saving"] = {enc: saving(baseline.tokens[enc], n) for enc, n in self.tokens.items()}
        return out


def saving(before: int, after: int) -> float:
    """Fraction of ``before`` saved by ``after`` (negative when ``after`` is bigger).

    >>> saving(200, 150), saving(100, 120), saving(0, 5)
    (0.25, -0.19999999999999996, 0.0)
    """
    return 0.0 if before == 0 else 1.0 - after / before


def measure(
    fmt: Format,
    value: Any,
    encodings: Sequence[str] = tokens.ENCODINGS,
) -> FormatResult:
    """Encode ``value`` with ``fmt``, count it, decode it back and check it.

    >>> fmt = default_formats()[1]
    >>> r = measure(fmt, {"a": [1, 2]})
    >>> r.text, r.bytes, r.lossless
    ('{"a":[1,2]}', 11, True)
    """
    res = FormatResult(fmt.name, fmt.label, note=fmt.note)
    if not fmt.available:
        res.error = fmt.note or "not available"
        return res
    try:
        text = fmt.encode(value)
    except GCFError as e:
        res.error = f"refused: error[{e.code}] {e.detail}"
        return res
    except Exception as e:  # a peer codec may raise anything; the report shows it
        res.error = f"encode failed: {type(e).__name__}: {e}"
        return res
    res.text = text
    res.bytes = utf8_len(text)
    res.tokens = {enc: tokens.count(text, enc) for enc in encodings}
    try:
        back = fmt.decode(text)
    except Exception as e:
        res.lossless = False
        res.error = f"decode failed: {type(e).__name__}: {e}"
        return res
    res.lossless = same_value(back, value, key_order=False)
    if not res.lossless:
        res.error = "round trip changed the value"
    elif fmt.key_order:
        res.key_order_kept = same_value(back, value)
        if not res.key_order_kept:
            res.note = (res.note + "; " if res.note else "") + "object key order changed"
    return res


@dataclass
class Comparison:
    """All formats measured on one value; ``baseline`` names the reference format."""

    results: list[FormatResult]
    baseline: str
    encodings: tuple[str, ...]
    methods: dict[str, str]

    def result(self, name: str) -> FormatResult:
        """The result of the format called ``name``."""
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def saving(self, name: str, encoding: str) -> float | None:
        """Token saving of ``name`` against the baseline in ``encoding`` (None if n/a)."""
        base, r = self.result(self.baseline), self.result(name)
        if base.text is None or r.text is None:
            return None
        return saving(base.tokens[encoding], r.tokens[encoding])

    def best_lossless(self, encoding: str) -> FormatResult | None:
        """The verified-lossless result with the fewest tokens in ``encoding``."""
        ok = [r for r in self.results if r.ok]
        return min(ok, key=lambda r: r.tokens[encoding]) if ok else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as ``gcfkit stats --json`` prints it."""
        base = self.result(self.baseline)
        return {
            "baseline": self.baseline,
            "encodings": list(self.encodings),
            "token_counts": self.methods,
            "formats": [r.to_dict(base) for r in self.results],
        }


def compare_formats(
    value: Any,
    *,
    formats: Sequence[Format] | None = None,
    encodings: Sequence[str] = tokens.ENCODINGS,
    baseline: str = "json-compact",
) -> Comparison:
    """Measure ``value`` in every format (default: :func:`default_formats`).

    Savings are against ``baseline`` (``"json-compact"`` or ``"json-pretty"``).
    ``methods`` records per encoding whether counts were exact or estimated.

    >>> cmp = compare_formats({"a": 1})
    >>> cmp.baseline, sorted(cmp.methods)
    ('json-compact', ['cl100k_base', 'o200k_base'])
    """
    fmts = list(formats) if formats is not None else default_formats()
    if baseline not in {f.name for f in fmts}:
        raise ValueError(f"baseline {baseline!r} is not among the formats")
    encs = tuple(encodings)
    results = [measure(f, value, encs) for f in fmts]
    return Comparison(results, baseline, encs, {e: tokens.method(e) for e in encs})
