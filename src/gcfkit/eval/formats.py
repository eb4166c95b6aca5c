"""The formats an eval compares, each rendered with the primer the proxy would send.

An :class:`EvalFormat` knows how to write a dataset (``render``), how to read one back
strictly (``decode``: the reference reader, and the judge of generated payloads), what the
proxy adds to the server's instructions when it sends this format (``primer``), and how a
second call of the same tool arrives (``render_pair``/``read_pair``: a full result again,
or a delta or an unchanged answer where the format has them).

A new format plugs in with :func:`register_format` and a factory; a factory whose package
is missing returns an unavailable format, which a run reports and skips.

>>> fmt = get_format("gcf")
>>> print(fmt.render([{"id": 1}, {"id": 2}], "t", None), end="")
GCF profile=generic tool=t
## [2]{id}
1
2
>>> fmt.decode(fmt.render({"a": None}, "t", None))
{'a': None}
>>> get_format("json").primer
''
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .. import dense, tokens
from .. import dumps as gcf_dumps
from ..answers.primer import PRIMER as _PROXY_PRIMER
from ..errors import ConfigError, GCFError
from ..graph import Graph, graph_to_json
from ..graph import dumps as graph_dumps
from ..header import DENSE_MAGIC, first_line, parse_header
from ..jsonio import dumps_compact, loads_json
from ..measure.report import toon_codec

__all__ = [
    "FORMATS",
    "EvalFormat",
    "available_formats",
    "get_format",
    "proxy_primer",
    "register_format",
]

Render = Callable[[Any, str, "Graph | None"], str]
RenderPair = Callable[[Any, Any, str], tuple[str, str]]
ReadPair = Callable[[str, str], Any]


def proxy_primer() -> str:
    """The primer the proxy appends to a server's instructions when it may send GCF."""
    return str(_PROXY_PRIMER)


@dataclass(frozen=True)
class EvalFormat:
    """One format of an eval (see the module docstring).

    ``render(value, tool, graph)`` writes the first (or only) tool result; ``graph`` is set
    for graph datasets. ``render_pair(first, second, tool)`` writes two calls' results as
    the reader receives them; ``read_pair(first_text, second_text)`` is the state a reader
    holds after both (a strict reading, for the reference reader). ``label`` is how a prompt
    names the format when it asks the model to write it; ``pair_note`` is what a prompt
    adds about the second call (how it was made). ``primer_for(texts)``, when set,
    is the primer for the payloads a prompt shows (a format whose primer depends on the
    constructs a payload uses); otherwise ``primer`` is.
    """

    name: str
    label: str
    render: Render
    decode: Callable[[str], Any]
    primer: str = ""
    render_pair: RenderPair | None = None
    read_pair: ReadPair | None = None
    available: bool = True
    note: str = ""
    primer_for: Callable[[Sequence[str]], str] | None = None
    pair_note: str = ""

    def primer_of(self, texts: Sequence[str]) -> str:
        """The primer the proxy would send along with the payloads ``texts``."""
        if self.primer_for is not None:
            return self.primer_for(texts)
        return self.primer

    def pair(self, first: Any, second: Any, tool: str) -> tuple[str, str]:
        """Both calls' results as this format delivers them (full results by default)."""
        if self.render_pair is not None:
            return self.render_pair(first, second, tool)
        return self.render(first, tool, None), self.render(second, tool, None)

    def read_after(self, first_text: str, second_text: str) -> Any:
        """The value a reader holds after reading both results (strict)."""
        if self.read_pair is not None:
            return self.read_pair(first_text, second_text)
        return self.decode(second_text)


def _unavailable(*_: Any) -> Any:
    raise ConfigError("invalid_option", "format not available")


# ---------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------


def _json_pretty(value: Any, tool: str, graph: Graph | None) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)


def _json_compact(value: Any, tool: str, graph: Graph | None) -> str:
    return dumps_compact(value)


def _json() -> EvalFormat:
    return EvalFormat("json", "JSON", _json_pretty, loads_json)


def _json_compact_format() -> EvalFormat:
    return EvalFormat("json-compact", "compact JSON", _json_compact, loads_json)


# ---------------------------------------------------------------------------------------
# TOON (optional package)
# ---------------------------------------------------------------------------------------


def _toon() -> EvalFormat:
    codec = toon_codec()
    if codec is None:
        return EvalFormat(
            "toon",
            "TOON",
            _unavailable,
            _unavailable,
            available=False,
            note="not installed (pip install toon-format, in gcfkit[bench])",
        )
    enc, dec, note = codec

    def render(value: Any, tool: str, graph: Graph | None) -> str:
        return enc(value)

    return EvalFormat("toon", "TOON", render, dec, note=note)


# ---------------------------------------------------------------------------------------
# GCF v3.5.3
# ---------------------------------------------------------------------------------------


def _gcf_render(value: Any, tool: str, graph: Graph | None) -> str:
    # A graph goes in the graph profile, as gcfkit.mcp.server sends a returned Graph.
    if graph is not None:
        return graph_dumps(graph)
    return gcf_dumps(value, tool=tool or None)


def _gcf_decode(text: str) -> Any:
    from .. import decode

    v = decode(text)
    if isinstance(v, Graph):
        return graph_to_json(v)
    if not isinstance(v, (dict, list, str, int, float, bool, type(None))):
        raise ValueError(f"a {type(v).__name__} is not a JSON value")
    return v


class ProxySession:
    """One client session through the real proxy core (sans I/O, no process): what
    ``gcfkit proxy`` with ``config`` sends a client. Result handles are drawn from a seeded
    memory, so the same calls give the same texts.

    >>> from gcfkit.proxy import ProxyConfig
    >>> s = ProxySession(ProxyConfig(refs="off", stats=False, dense=(), primer=False))
    >>> rows = [{"id": i, "name": f"user {i}", "active": True} for i in range(8)]
    >>> s.call("t", {}, rows)[0].splitlines()[:2]
    ['GCF profile=generic', '## [8]{id,name,active}']
    """

    def __init__(self, config: Any, *, seed: int = 0) -> None:
        from ..proxy import ProxyCore
        from ..relative import ResultMemory

        self.core = ProxyCore(config, memory=lambda: ResultMemory(seed=seed))
        self._id = 0

    def _exchange(self, method: str, params: dict[str, Any], result: dict[str, Any]) -> Any:
        self._id += 1
        request = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        self.core.from_client(json.dumps(request, ensure_ascii=False).encode() + b"\n")
        reply = {"jsonrpc": "2.0", "id": self._id, "result": result}
        out = self.core.from_server(json.dumps(reply, ensure_ascii=False).encode() + b"\n")
        msgs = [json.loads(o.data) for o in out if o.to == "client"]
        (msg,) = [m for m in msgs if m.get("id") == self._id]
        return msg["result"]

    def instructions(self) -> str:
        """The instructions the client sees for a server that sent none (the primer)."""
        result = self._exchange(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": _CLIENT},
            {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": _CLIENT},
        )
        return str(result.get("instructions") or "")

    def call(self, tool: str, arguments: dict[str, Any], value: Any) -> list[str]:
        """The text blocks the client receives when ``tool`` returns ``value`` as JSON."""
        text = _json_compact(value, tool, None)
        result = self._exchange(
            "tools/call",
            {"name": tool, "arguments": arguments},
            {"content": [{"type": "text", "text": text}]},
        )
        return [b["text"] for b in result["content"] if b.get("type") == "text"]


_CLIENT: Final = {"name": "gcfkit-eval", "version": "1"}


def _config(**kw: Any) -> Any:
    from ..proxy import Policy, ProxyConfig

    delta = kw.pop("delta", False)
    # Each format renders its single payloads itself and states its primer itself: the
    # proxy sessions here give the v3.5.3 forms, with the explanation in the instructions.
    kw.setdefault("dense", ())
    kw.setdefault("primer_carrier", "instructions")
    return ProxyConfig(
        policy=Policy.from_mapping({"defaults": {"delta": delta}}), stats=False, **kw
    )


def _one(blocks: list[str]) -> str:
    # Several text blocks (a result and its ref= block) are shown one after the other.
    return "\n\n".join(blocks)


def proxy_pair(first: Any, second: Any, tool: str) -> tuple[str, str]:
    """Two calls of ``tool`` with the same arguments through ``gcfkit proxy --delta --refs
    off`` (GCF v3.5.3: the second answer may be a §10a delta or ``unchanged=true``)."""
    s = ProxySession(_config(delta=True, refs="off"))
    return _one(s.call(tool, {}, first)), _one(s.call(tool, {}, second))


def _read_any(text: str) -> Any:
    """A tool result text as the proxy may send it: GCF, or compact JSON."""
    if text.startswith(("GCF ", DENSE_MAGIC)):
        return _gcf_decode(text)
    return loads_json(text)


def _gcf_read_pair(first_text: str, second_text: str) -> Any:
    from .. import keyed

    base = _read_any(first_text)
    header = parse_header(first_line(second_text)) if second_text.startswith("GCF ") else None
    if header is not None and header.flag("unchanged"):
        return base
    if header is not None and header.flag("delta"):
        delta = keyed.loads_delta(second_text)
        if not isinstance(base, list):
            raise GCFError("invalid_delta", "a delta needs a record list to apply to")
        held = keyed.KeyedSet(delta.key, list(delta.fields), base)
        return [dict(r) for r in keyed.apply_delta(held, delta).rows]
    return _read_any(second_text)


def _gcf() -> EvalFormat:
    return EvalFormat(
        "gcf",
        "GCF",
        _gcf_render,
        _gcf_decode,
        primer=proxy_primer(),
        render_pair=proxy_pair,
        read_pair=_gcf_read_pair,
    )


# ---------------------------------------------------------------------------------------
# GCF with extensions (issue 10: the dense profile and relative answers)
# ---------------------------------------------------------------------------------------


_EXT_CONFIG: Final = {"refs": "all"}


def _split_ref(text: str) -> tuple[str, str | None]:
    """(result, handle): a result shown with its ``ref=`` block after it, taken apart."""
    from ..relative import is_handle

    body, sep, last = text.rpartition("\n\n")
    if sep and last.startswith("ref=") and is_handle(last[4:]):
        return body, last[4:]
    return text, None


def _ext_decode(text: str) -> Any:
    body, _ = _split_ref(text)
    return _read_any(body)


def _ext_pair(first: Any, second: Any, tool: str) -> tuple[str, str]:
    """The agent holds the first result and names it in ``_since`` on the repeat."""
    from ..relative import ref_of

    s = ProxySession(_config(**_EXT_CONFIG))
    t1 = _one(s.call(tool, {}, first))
    body, handle = _split_ref(t1)
    handle = handle or ref_of(body)
    args = {"_since": handle} if handle else {}
    return t1, _one(s.call(tool, args, second))


def _ext_read_pair(first_text: str, second_text: str) -> Any:
    from .. import relative

    reader = relative.Reader()
    body, handle = _split_ref(first_text)
    if handle is not None:
        reader.hold(handle, _read_any(body))
    elif body.startswith(("GCF ", DENSE_MAGIC)) and relative.ref_of(body):
        reader.read(body)
    if relative.is_answer(second_text):
        return reader.read(second_text)
    return _ext_decode(second_text)


def _gcf_ext() -> EvalFormat:
    """GCF with every extension: single results in the dense profile (definitions, list
    cells, constant columns, short rows, chosen by exact o200k counts), repeats as ``gcfkit
    proxy --refs all`` sends them through the real proxy core (results named ``ref=``, the
    repeat passes ``_since`` and gets ``@@ unchanged`` or ``@@ patch``). The primer is the
    proxy's instructions, plus the dense sentences of the constructs a prompt's payloads use."""
    base = ProxySession(_config(**_EXT_CONFIG)).instructions()
    count = tokens.counter(tokens.DEFAULT_ENCODING).count
    used: dict[str, tuple[str, ...]] = {}

    def render(value: Any, tool: str, graph: Graph | None) -> str:
        if graph is not None:
            return graph_dumps(graph)
        enc = dense.encode(value, count=count, tool=tool or None)
        used[enc.text] = enc.constructs
        return enc.text

    def primer_for(texts: Sequence[str]) -> str:
        if not texts:  # writing, not reading: every construct may be used
            return f"{base}\n\n{dense.primer(dense.CONSTRUCTS)}"
        if not any(dense.is_dense(t) for t in texts):
            return base
        constructs = [c for t in texts for c in used.get(t, ())]
        return f"{base}\n\n{dense.primer(constructs)}"

    return EvalFormat(
        "gcf-ext",
        "GCF with extensions",
        render,
        _ext_decode,
        primer=base,
        render_pair=_ext_pair,
        read_pair=_ext_read_pair,
        note="dense profile (gcfkit.dense) and relative answers (ref=, _since)",
        primer_for=primer_for,
        pair_note="The second call named the first result with _since.",
    )


# ---------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------

FORMATS: dict[str, Callable[[], EvalFormat]] = {}
_ALIASES: Final = {"json-pretty": "json", "gcf-v3": "gcf"}


def register_format(name: str, factory: Callable[[], EvalFormat]) -> None:
    """Add (or replace) a format; ``factory`` is called when a run asks for it."""
    FORMATS[name] = factory


for _name, _factory in (
    ("json", _json),
    ("json-compact", _json_compact_format),
    ("toon", _toon),
    ("gcf", _gcf),
    ("gcf-ext", _gcf_ext),
):
    register_format(_name, _factory)


def get_format(name: str) -> EvalFormat:
    """The format called ``name`` (available or not); ConfigError for an unknown name."""
    factory = FORMATS.get(_ALIASES.get(name, name))
    if factory is None:
        raise ConfigError("invalid_option", f"unknown format {name!r}; one of {', '.join(FORMATS)}")
    return factory()


def available_formats() -> list[str]:
    """The names of the formats this install can render."""
    return [n for n in FORMATS if get_format(n).available]


def format_by_label(label: str) -> EvalFormat | None:
    """The available format a prompt names as ``label`` (for the reference reader)."""
    for name in FORMATS:
        f = get_format(name)
        if f.available and f.label == label:
            return f
    return None
