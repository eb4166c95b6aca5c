"""The data an eval asks about: TOON's datasets, real MCP results, synthetic sets and graphs.

A :class:`Dataset` is one JSON value (what a tool returned) plus, for graphs, the
:class:`gcfkit.graph.Graph` a GCF-aware server would send in the graph profile. Every
loader is deterministic for a given ``seed``: large record lists are cut to ``rows``
records by a seeded sample that keeps their order, so one run's prompts can be rebuilt.

Specs (``gcfkit eval --datasets``):

* ``toon:NAME``: a file of TOON's benchmark datasets (``tabular``, ``nested``, ``analytics``,
  ``github``, ``event-logs``, ``nested-config``, ``keyed``, ``nested-group``);
* ``mcp:SERVER/NNN`` (one captured result), ``mcp:SERVER`` or ``mcp`` (every JSON result of
  a server, or of the whole corpus, that holds records);
* ``synthetic:records[:N]``: tickets with nulls, absent fields, nested objects, list cells,
  repeated long strings and a constant column, the constructs a reader can trip on;
* ``synthetic:graph[:SYMBOLS:EDGES]``: a code graph like the GCF paper's eval (500 symbols,
  200 edges by default).

>>> ds = load_dataset("synthetic:records:5", seed=1)
>>> ds.name, len(ds.value["tickets"])
('synthetic:records:5', 5)
>>> load_dataset("synthetic:records:5", seed=1).value == ds.value
True
>>> [c.path for c in find_collections(ds.value)]
[('tickets',)]
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ..errors import ConfigError
from ..graph import Edge, Graph, Symbol, graph_to_json
from ..graph import dumps as graph_dumps
from ..graph import loads as graph_loads
from ..jsonio import loads_json
from ..traffic.corpus import Call, is_session, read_session

__all__ = [
    "DEFAULT_DATASETS",
    "TOON_DATASETS",
    "Collection",
    "Dataset",
    "corpus_dir",
    "find_collections",
    "load_dataset",
    "load_datasets",
]

TOON_DATASETS: Final = (
    "tabular",
    "nested",
    "analytics",
    "github",
    "event-logs",
    "nested-config",
    "keyed",
    "nested-group",
)
DEFAULT_DATASETS: Final = ("synthetic:records", "synthetic:graph", "toon:tabular", "toon:nested")

#: Identity columns, most specific first; a column named like these whose values are unique
#: scalars is how a question names a record ("the record whose id is 7").
_ID_NAMES: Final = (
    "id",
    "key",
    "uuid",
    "sha",
    "qualified_name",
    "orderId",
    "sku",
    "email",
    "date",
    "name",
    "path",
)


@dataclass(frozen=True)
class Dataset:
    """One tool result to ask questions about.

    ``tool`` is the tool that returned it (the prompt says so, and GCF headers carry it);
    ``graph`` is set for graph datasets, where GCF formats use the graph profile.
    """

    name: str
    value: Any
    tool: str
    source: str
    graph: Graph | None = None


@dataclass(frozen=True)
class Collection:
    """Records inside a value: a list of objects (``kind="list"``, identified by
    ``id_field`` when one is unique) or an object of objects (``kind="map"``, identified by
    their keys). ``path`` is the object keys from the root (empty: the value itself)."""

    path: tuple[str, ...]
    kind: Literal["list", "map"]
    records: tuple[dict[str, Any], ...]
    ids: tuple[Any, ...] | None
    id_field: str | None


# ---------------------------------------------------------------------------------------
# Finding records
# ---------------------------------------------------------------------------------------


def _unique_scalar_field(rows: Sequence[dict[str, Any]]) -> str | None:
    names: dict[str, None] = {}
    for name in _ID_NAMES:
        names[name] = None
    for row in rows:
        for key in row:
            names.setdefault(key, None)
    for name in names:
        seen: set[tuple[str, Any]] = set()
        for row in rows:
            v = row.get(name)
            if isinstance(v, bool) or not isinstance(v, (str, int)):
                break
            typed = (type(v).__name__, v)
            if typed in seen:
                break
            seen.add(typed)
        else:
            return name
    return None


def find_collections(value: Any, *, min_records: int = 2) -> list[Collection]:
    """Every record collection in ``value``, outermost first (objects inside records are
    not searched: a question about them is a nested lookup of the record).

    >>> v = {"db": {"replicas": [{"host": "a", "port": 1}, {"host": "b", "port": 2}]}}
    >>> [(c.path, c.kind, c.id_field) for c in find_collections(v)]
    [(('db', 'replicas'), 'list', 'host')]
    """
    out: list[Collection] = []
    stack: list[tuple[tuple[str, ...], Any]] = [((), value)]
    while stack:
        path, v = stack.pop(0)
        if isinstance(v, list):
            if len(v) >= min_records and all(isinstance(r, dict) for r in v):
                field = _unique_scalar_field(v)
                ids = tuple(r[field] for r in v) if field else None
                out.append(Collection(path, "list", tuple(v), ids, field))
            continue
        if not isinstance(v, dict):
            continue
        items = list(v.items())
        if (
            len(items) >= min_records
            and all(isinstance(x, dict) and x for _, x in items)
            and len({tuple(x) for _, x in items}) <= max(1, len(items) // 4)
        ):
            # An object whose members are records of a few shapes: a keyed map.
            out.append(Collection(path, "map", tuple(x for _, x in items), tuple(v), None))
            continue
        stack.extend(((*path, k), x) for k, x in items)
    return out


def at_path(value: Any, path: Sequence[str]) -> Any:
    """The member of ``value`` at object-key ``path`` (KeyError when absent)."""
    for step in path:
        if not isinstance(value, dict):
            raise KeyError(step)
        value = value[step]
    return value


# ---------------------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------------------


def _sample_list(rows: list[Any], n: int, rng: random.Random) -> list[Any]:
    if len(rows) <= n:
        return rows
    keep = sorted(rng.sample(range(len(rows)), n))
    return [rows[i] for i in keep]


def _cut(value: Any, rows: int, rng: random.Random) -> Any:
    """``value`` with each top-level record collection sampled down to ``rows`` records."""
    colls = find_collections(value)
    if not colls:
        return value
    top = min(len(c.path) for c in colls)
    targets = {c.path for c in colls if len(c.path) == top}

    def walk(v: Any, path: tuple[str, ...]) -> Any:
        if path in targets:
            if isinstance(v, list):
                return _sample_list(v, rows, rng)
            keys = _sample_list(list(v), rows, rng)
            return {k: v[k] for k in keys}
        if isinstance(v, dict):
            return {k: walk(x, (*path, k)) for k, x in v.items()}
        return v

    return walk(value, ())


# ---------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------


def corpus_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where ``toon/`` and ``mcp/`` live: ``explicit``, else ``$GCFKIT_CORPUS_DIR``, else
    ``../shared/corpus`` from the working directory or from a source checkout."""
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get("GCFKIT_CORPUS_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for base in (Path.cwd(), *here.parents):
        candidate = base.parent / "shared" / "corpus"
        if (candidate / "toon").is_dir() or (candidate / "mcp").is_dir():
            return candidate
    return Path.cwd().parent / "shared" / "corpus"


def _read_json(path: Path) -> Any:
    try:
        return loads_json(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError("io_error", f"cannot read dataset {path}: {e.strerror}") from None


def _toon(name: str, corpus: Path, rows: int, rng: random.Random) -> Dataset:
    if name not in TOON_DATASETS:
        raise ConfigError(
            "invalid_option", f"unknown TOON dataset {name!r}; one of {', '.join(TOON_DATASETS)}"
        )
    path = corpus / "toon" / f"{name}.json"
    value = _cut(_read_json(path), rows, rng)
    return Dataset(f"toon:{name}", value, f"get_{name.replace('-', '_')}", str(path))


def _result_value(result: Any) -> Any | None:
    """The JSON value of a captured tool result's text, as the proxy reads it (one JSON
    text block, or several JSON-object blocks joined into an array), or None."""
    if not isinstance(result, dict) or result.get("isError"):
        return None
    blocks = [
        b.get("text")
        for b in result.get("content") or ()
        if isinstance(b, dict) and b.get("type") == "text"
    ]
    values = []
    for text in blocks:
        if not isinstance(text, str):
            return None
        try:
            values.append(loads_json(text))
        except ValueError:
            return None
    if len(values) == 1:
        return values[0]
    if len(values) > 1 and all(isinstance(v, dict) for v in values):
        return values
    return None


def _mcp_calls(spec: str, corpus: Path) -> list[tuple[Path, Call]]:
    """The recorded calls an ``mcp:`` spec names, each with its file, in corpus order."""
    root = corpus / "mcp"
    server, _, number = spec.partition("/")
    if spec:
        sessions = [root / server]
    else:
        sessions = sorted(p for p in root.iterdir() if is_session(p)) if root.is_dir() else []
    found = [
        (session.path / call.file, call)
        for path in sessions
        if is_session(path)
        for session in (read_session(path),)
        for call in session.calls
        if not number or call.file.startswith(f"{number}_")
    ]
    if spec and not found and number:
        raise ConfigError("invalid_option", f"no MCP corpus result {spec!r} under {root}")
    if spec and not found:
        raise ConfigError("invalid_option", f"no MCP corpus server {server!r} under {root}")
    return found


def _mcp(spec: str, corpus: Path, rows: int, rng: random.Random) -> list[Dataset]:
    one = "/" in spec
    out: list[Dataset] = []
    for path, call in _mcp_calls(spec, corpus):
        value = _result_value(call.result)
        if value is None or (not one and not find_collections(value, min_records=3)):
            if one:
                raise ConfigError("invalid_option", f"{path} holds no JSON tool result")
            continue
        name = f"mcp:{path.parent.name}/{path.name.split('_', 1)[0]}"
        out.append(Dataset(name, _cut(value, rows, rng), call.tool, str(path)))
    return out


# ---------------------------------------------------------------------------------------
# Synthetic data
# ---------------------------------------------------------------------------------------

_STATUSES: Final = ("open", "closed", "pending", "blocked")
_PRIORITIES: Final = ("low", "medium", "high", "urgent")
_PEOPLE: Final = (
    "Dayna Blackwell <dayna@example.org>",
    "Lin Okafor <lin.okafor@example.org>",
    "Ada Lindqvist <ada@example.org>",
    "Bob Martínez <bob.martinez@example.org>",
    "Cy Tanaka <cy@example.org>",
)
_TEAMS: Final = ("Platform reliability", "Developer experience", "Data ingestion pipeline")
_COMPONENTS: Final = ("decoder", "encoder", "proxy", "cli", "ledger", "tokens")
_LABELS: Final = ("bug", "perf", "docs", "regression", "security", "ux", "tests")
_WORDS: Final = (
    "header",
    "count",
    "mismatch",
    "escape",
    "table",
    "stream",
    "delta",
    "primer",
    "session",
    "timeout",
    "budget",
    "ledger",
)


def _tickets(n: int, rng: random.Random) -> dict[str, Any]:
    rows = []
    ident = 1000
    for _ in range(n):
        ident += rng.randint(1, 3)
        status = rng.choice(_STATUSES)
        row: dict[str, Any] = {
            "id": ident,
            "title": " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 4))),
            "status": status,
            "priority": rng.choice(_PRIORITIES),
            "project": "gcfkit",
            "assignee": rng.choice(_PEOPLE),
            "team": rng.choice(_TEAMS),
            "estimate": round(rng.uniform(0.5, 13), 1) if rng.random() < 0.8 else None,
            "labels": rng.sample(_LABELS, rng.randint(0, 3)),
            "reviewer": rng.choice(_PEOPLE) if rng.random() < 0.6 else None,
            "details": {"component": rng.choice(_COMPONENTS), "severity": rng.randint(1, 5)},
        }
        if status == "closed":
            row["resolved_at"] = f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}"
        elif rng.random() < 0.3:
            row["resolved_at"] = None
        rows.append(row)
    return {"tickets": rows}


_GRAPH_KINDS: Final = (
    ("function", 8),
    ("method", 5),
    ("type", 4),
    ("interface", 2),
    ("var", 1),
    ("const", 1),
    ("package", 1),
)
_PROVENANCE: Final = ("lsp_resolved", "ast_inferred", "heuristic")
_EDGE_TYPES: Final = ("calls", "references", "implements", "imports")
_PACKAGES: Final = ("internal/mcp", "internal/graph", "internal/store", "cmd/server", "pkg/auth")
_NAME_PARTS: Final = (
    "Handle",
    "New",
    "Resolve",
    "Parse",
    "Encode",
    "Decode",
    "Server",
    "Session",
    "Cache",
    "Token",
    "Budget",
    "Request",
    "Graph",
    "Symbol",
    "Edge",
    "Index",
)


def _graph(n_symbols: int, n_edges: int, rng: random.Random) -> Graph:
    kinds = [k for k, w in _GRAPH_KINDS for _ in range(w)]
    names: set[str] = set()
    symbols: list[Symbol] = []
    while len(symbols) < n_symbols:
        name = "".join(rng.choice(_NAME_PARTS) for _ in range(rng.randint(2, 3)))
        qname = f"github.com/acme/shop/{rng.choice(_PACKAGES)}.{name}"
        if qname in names:
            continue
        names.add(qname)
        distance = rng.choices((0, 1, 2), weights=(2, 3, 5))[0]
        score = round(rng.uniform(0.05, 0.99), 2)
        symbols.append(Symbol(qname, rng.choice(kinds), score, rng.choice(_PROVENANCE), distance))
    pairs: set[tuple[str, str, str]] = set()
    edges: list[Edge] = []
    if n_symbols < 2:
        n_edges = 0
    while len(edges) < n_edges:
        a, b = rng.sample(symbols, 2)
        triple = (a.qualified_name, b.qualified_name, rng.choice(_EDGE_TYPES))
        if triple in pairs:
            continue
        pairs.add(triple)
        edges.append(Edge(*triple))
    # The graph profile writes symbols and edges in its canonical order (spec §16.1); the
    # JSON form takes the same order, so both list the same things in the same places.
    return graph_loads(graph_dumps(Graph(tuple(symbols), tuple(edges), tool="context_for_task")))


def _ints(text: str, spec: str, count: int) -> list[int]:
    try:
        parts = [int(p) for p in text.split(":")] if text else []
    except ValueError:
        parts = []
    if len(parts) > count or any(p < 0 for p in parts) or (text and not parts):
        raise ConfigError("invalid_option", f"bad sizes in dataset spec {spec!r}")
    return parts


def _synthetic(rest: str, spec: str, rows: int, rng: random.Random) -> Dataset:
    kind, _, sizes = rest.partition(":")
    if kind == "records":
        (n,) = _ints(sizes, spec, 1) or [rows]
        return Dataset(spec, _tickets(n, rng), "list_tickets", "synthetic")
    if kind == "graph":
        parts = _ints(sizes, spec, 2)
        n_symbols = parts[0] if parts else 500
        n_edges = parts[1] if len(parts) > 1 else (200 if not parts else n_symbols * 2 // 5)
        g = _graph(n_symbols, n_edges, rng)
        return Dataset(spec, graph_to_json(g), g.tool, "synthetic", graph=g)
    raise ConfigError("invalid_option", f"unknown synthetic dataset {spec!r} (records, graph)")


# ---------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------


def _rng(seed: int, spec: str) -> random.Random:
    # One stream per dataset: adding a dataset to a run never changes another's sample.
    return random.Random(f"{seed}:{spec}")


def load_datasets(
    spec: str, *, seed: int = 0, rows: int = 100, corpus: str | os.PathLike[str] | None = None
) -> list[Dataset]:
    """Every dataset a spec names (``mcp:SERVER`` names several), in a stable order."""
    source, _, rest = spec.partition(":")
    rng = _rng(seed, spec)
    if source == "synthetic":
        return [_synthetic(rest, spec, rows, rng)]
    if source == "toon":
        return [_toon(rest, corpus_dir(corpus), rows, rng)]
    if source == "mcp":
        found = _mcp(rest, corpus_dir(corpus), rows, rng)
        if not found:
            raise ConfigError("invalid_option", f"{spec!r} names no JSON result with records")
        return found
    if source.endswith(".json") or os.sep in spec:
        path = Path(spec)
        return [Dataset(path.stem, _cut(_read_json(path), rows, rng), "get_data", str(path))]
    raise ConfigError(
        "invalid_option",
        f"unknown dataset {spec!r}: use toon:NAME, mcp:SERVER[/NNN], synthetic:records, "
        "synthetic:graph or a path to a .json file",
    )


def load_dataset(
    spec: str, *, seed: int = 0, rows: int = 100, corpus: str | os.PathLike[str] | None = None
) -> Dataset:
    """The one dataset ``spec`` names (see the module docstring for the forms)."""
    found = load_datasets(spec, seed=seed, rows=rows, corpus=corpus)
    if len(found) != 1:
        raise ConfigError("invalid_option", f"{spec!r} names {len(found)} datasets, not one")
    return found[0]


def iter_scalars(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, scalar) for every scalar under ``value``; list indexes are ints in the path."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from iter_scalars(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from iter_scalars(v, (*path, i))
    else:
        yield path, value
