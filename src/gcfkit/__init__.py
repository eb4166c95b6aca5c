"""gcfkit: GCF (Graph Compact Format) for agents.

The generic profile carries the JSON data model in fewer tokens, losslessly:

>>> import gcfkit
>>> wire = gcfkit.dumps({"users": [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Lin"}]})
>>> print(wire, end="")
GCF profile=generic
## users [2]{id,name}
1|Ada
2|Lin
>>> gcfkit.loads(wire)
{'users': [{'id': 1, 'name': 'Ada'}, {'id': 2, 'name': 'Lin'}]}

``dumps``/``loads``/``dump``/``load`` mirror the stdlib ``json`` module; :func:`decode` reads
any GCF payload (generic value, graph, graph delta or generic delta) by its header.
:func:`speedups_active` tells whether the optional C accelerator serves the generic codec
(same results, faster); ``GCFKIT_PURE_PYTHON=1`` forces the pure-Python reference. Every
error is a :class:`GCFError`: a payload's rejection a :class:`GCFDecodeError` placed in it,
as ``json.JSONDecodeError`` is, a value's a :class:`GCFEncodeError` that names it:

>>> try:
...     gcfkit.loads("GCF profile=generic\\n## t [2]{a}\\n1\\n")
... except gcfkit.GCFDecodeError as e:
...     (e.code, e.lineno, e.colno, e.pos)
('count_mismatch', 2, 1, 20)
>>> try:
...     gcfkit.dumps({"t": [{"a": 1}, {"a": float("nan")}]})
... except gcfkit.GCFEncodeError as e:
...     (e.code, e.path)
('out_of_range', '$.t[1].a')
"""

from __future__ import annotations

from typing import IO, Any

from .errors import ConfigError, GCFDecodeError, GCFEncodeError, GCFError
from .generic.decoder import loads
from .generic.encoder import dumps
from .header import Spec, first_line, parse_header, to_text
from .speedups import active as speedups_active

__all__ = [
    "ConfigError",
    "GCFDecodeError",
    "GCFEncodeError",
    "GCFError",
    "decode",
    "dump",
    "dumps",
    "load",
    "loads",
    "speedups_active",
]
__version__ = "0.1.0"


def dump(value: Any, fp: IO[str], **kw: Any) -> None:
    """Write ``dumps(value, **kw)`` to the text file ``fp``.

    >>> import io
    >>> buf = io.StringIO()
    >>> dump([1, 2], buf)
    >>> buf.getvalue()
    'GCF profile=generic\\n## [2]: 1,2\\n'
    """
    fp.write(dumps(value, **kw))


def load(fp: IO[str] | IO[bytes], **kw: Any) -> Any:
    """Decode the generic payload in the text or binary file ``fp`` (``loads(fp.read(), **kw)``).

    >>> import io
    >>> load(io.BytesIO(b"GCF profile=generic\\n=42\\n"))
    42
    """
    return loads(fp.read(), **kw)


def decode(text: str | bytes, *, spec: Spec = "3.6.0") -> Any:
    """Decode any GCF payload by its header.

    Generic and dense payloads (docs/extensions/dense.md) give their JSON value; graph
    payloads a :class:`gcfkit.graph.Graph`;
    graph deltas a :class:`gcfkit.graph.GraphDelta`; generic deltas a
    :class:`gcfkit.keyed.GenericDelta` (an ``unchanged=true`` answer is a delta whose two
    roots are equal); relative answers (``@@ ...``, docs/extensions/relative-answers.md) a
    :class:`gcfkit.relative.Unchanged`, ``Patch`` or ``Edit``. Malformed input raises
    :class:`GCFError`. A generic payload may use the reference's v3.6.0 table forms
    unless ``spec="3.5.3"`` (as :func:`loads`).

    >>> decode("GCF profile=generic\\n## [3]: a,b,c\\n")
    ['a', 'b', 'c']
    >>> decode("@@ unchanged tool=git_status since=482913\\n")
    Unchanged(tool='git_status', since='482913')
    """
    from . import relative

    if relative.is_answer(text):
        return relative.loads(text)
    text = to_text(text)
    try:
        header = parse_header(first_line(text))
    except GCFError:
        # A malformed header gets the generic decoder's strict checks, in their order.
        return loads(text, spec=spec)
    # An `unchanged=true` answer (§10.3) reads as a delta whose two roots are equal.
    fields = header.fields
    is_delta = "true" in (fields.get("delta"), fields.get("unchanged"))
    if header.profile == "graph":
        from . import graph

        return graph.loads_delta(text) if is_delta else graph.loads(text)
    if header.profile == "dense":
        from . import dense

        return dense.loads(text)
    if is_delta:
        from . import keyed

        return keyed.loads_delta(text)
    return loads(text, spec=spec)
