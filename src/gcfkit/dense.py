"""The GCF dense profile: GCF v3.5.3 plus five constructs for repetition and lists.

Specified in ``docs/extensions/dense.md``. A dense payload starts ``GCF-dense``
(:data:`gcfkit.header.DENSE_MAGIC`) where GCF has ``GCF profile=``, so every v3.5.3 decoder,
graph or generic, rejects it at line 1 (``gcfkit.loads`` with ``unsupported_profile``) and
no reader can silently misread one. Read it with :func:`loads` or :func:`gcfkit.decode`.

>>> from gcfkit import dense
>>> rows = [{"name": f"commit {i}", "type": "commit", "tags": ["release", "v2"]} for i in range(3)]
>>> wire = dense.dumps({"commits": rows})
>>> print(wire, end="")
GCF-dense
## commits [3]{name,type=commit,tags}
commit 0|[2]: release,v2
commit 1|[2]: release,v2
commit 2|[2]: release,v2
>>> dense.loads(wire) == {"commits": rows}
True

The constructs (each can be switched off; every configuration writes a valid dense payload):

* ``defs``: a string that recurs is defined once (``$a=text`` after the header) and written
  ``$a`` (D4); literal strings beginning with ``$`` are always quoted;
* ``lists``: a primitive list in a table row is a cell ``[N]: a,b`` (D5);
* ``constants``: a column with one value in every row is declared ``{f=v}`` (D6);
* ``short_rows``: a row leaves out its trailing absent (``~``) cells (D7);
* and always: a row carries ``@N`` only when a positional inline body follows (D8).

Which strings are defined depends on the cost function: pass ``count`` (text to tokens, e.g.
``gcfkit.tokens.counter("o200k_base").count``) for exact, tokenizer-specific choices; without
it the dependency-free estimate of D9.3 decides. Output is canonical and deterministic for a
value, a cost function and a configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, Final

from .generic.cells import with_default
from .generic.decoder import loads_dense
from .generic.definitions import Count, estimate, select
from .generic.encoder import encode_dense
from .header import DENSE_MAGIC, dense_header

__all__ = [
    "CONSTRUCTS",
    "PRIMER",
    "PROFILE",
    "Count",
    "Encoded",
    "dump",
    "dumps",
    "encode",
    "estimate",
    "is_dense",
    "load",
    "loads",
    "primer",
]

#: The header's profile value.
PROFILE: Final = "dense"

#: The constructs :func:`encode` reports, in the order the primer explains them.
CONSTRUCTS: Final = ("defs", "lists", "constants", "short_rows")

#: One sentence per construct (D13), for readers that do not know the profile. ``profile``
#: introduces the others; a construct's sentence is needed only by payloads that use it.
PRIMER: Final[dict[str, str]] = {
    "profile": f"{DENSE_MAGIC} is GCF with these additions.",
    "defs": "A bare $name stands for the string on its $name= line at the top.",
    "lists": "A cell [N]: a,b is a list of N values.",
    "constants": "A header field f=v is a column whose value is v in every row; rows omit it.",
    "short_rows": "A row with fewer cells than the header leaves its last fields absent.",
}


@dataclass(frozen=True)
class Encoded:
    """A dense payload and the constructs it uses (a subset of :data:`CONSTRUCTS`).

    >>> e = encode({"rows": [{"id": 1, "t": ["x"]}, {"id": 2, "t": []}]})
    >>> e.constructs
    ('lists',)
    """

    text: str
    constructs: tuple[str, ...]


def encode(
    value: Any,
    *,
    count: Count | None = None,
    tool: str | None = None,
    default: Callable[[Any], Any] | None = None,
    defs: bool = True,
    lists: bool = True,
    constants: bool = True,
    short_rows: bool = True,
) -> Encoded:
    """Encode ``value`` as a canonical dense payload and say which constructs it uses.

    ``count`` is the cost function for choosing definitions (D9.2); ``tool`` adds the
    ``tool=`` header field; ``default`` converts values outside the JSON model, and errors
    name the value's path, as in :func:`gcfkit.dumps`; the four flags switch constructs off
    (D9.4).

    >>> encode({"a": "$5"}).text
    'GCF-dense\\na="$5"\\n'
    >>> encode({"tags": {"b", "a"}}, default=sorted).text
    'GCF-dense\\ntags[2]: a,b\\n'
    """
    if default is not None:
        # Converted first: the definitions are chosen among the strings actually written.
        value = with_default(value, default, 1)
    chosen = select(value, count) if defs else {}
    text, used = encode_dense(
        value, chosen, tool=tool, lists=lists, constants=constants, short_rows=short_rows
    )
    return Encoded(text, tuple(c for c in CONSTRUCTS if c in used))


def dumps(
    value: Any,
    *,
    count: Count | None = None,
    tool: str | None = None,
    default: Callable[[Any], Any] | None = None,
    defs: bool = True,
    lists: bool = True,
    constants: bool = True,
    short_rows: bool = True,
) -> str:
    """Encode ``value`` as a canonical dense payload (ends with LF); see :func:`encode`.

    >>> team = "platform-team@example.com"
    >>> print(dumps({"owner": team, "cc": [team, team, team]}), end="")
    GCF-dense
    $a=platform-team@example.com
    owner=$a
    cc[3]: $a,$a,$a
    """
    return encode(
        value,
        count=count,
        tool=tool,
        default=default,
        defs=defs,
        lists=lists,
        constants=constants,
        short_rows=short_rows,
    ).text


def loads(text: str | bytes, *, parse_float: Callable[[str], Any] | None = None) -> Any:
    """Decode a dense payload (strict). A v3.5.3 payload is refused (``unsupported_profile``):
    read those with :func:`gcfkit.loads`, or either kind with :func:`gcfkit.decode`.
    ``parse_float`` and the errors (a placed :class:`~gcfkit.errors.GCFDecodeError`) are
    :func:`gcfkit.loads`'s.

    >>> loads("GCF-dense\\n$a=hello world\\n## r [2]{k,v=$a}\\n1\\n2\\n")
    {'r': [{'k': 1, 'v': 'hello world'}, {'k': 2, 'v': 'hello world'}]}
    >>> from decimal import Decimal
    >>> loads("GCF-dense\\n## r [2]{k,p=0.10}\\n1\\n2\\n", parse_float=Decimal)
    {'r': [{'k': 1, 'p': Decimal('0.10')}, {'k': 2, 'p': Decimal('0.10')}]}
    """
    return loads_dense(text, parse_float=parse_float)


def dump(value: Any, fp: IO[str], **kw: Any) -> None:
    """Write ``dumps(value, **kw)`` to the text file ``fp``.

    >>> import io
    >>> buf = io.StringIO()
    >>> dump([1, 2], buf)
    >>> buf.getvalue()
    'GCF-dense\\n## [2]: 1,2\\n'
    """
    fp.write(dumps(value, **kw))


def load(fp: IO[str] | IO[bytes], **kw: Any) -> Any:
    """Decode the dense payload in the text or binary file ``fp`` (``loads(fp.read(), **kw)``).

    >>> import io
    >>> load(io.BytesIO(b"GCF-dense\\n=42\\n"))
    42
    """
    return loads(fp.read(), **kw)


def is_dense(text: str | bytes) -> bool:
    """True when ``text``'s header names the dense profile (a cheap look at line 1).

    >>> is_dense("GCF-dense tool=x\\n=1\\n"), is_dense("GCF profile=generic\\n")
    (True, False)
    """
    head = text[:64]
    if isinstance(head, bytes):
        head = head.decode("utf-8", "replace")
    return dense_header(head.split("\n", 1)[0].rstrip("\r"))


def primer(constructs: tuple[str, ...] | list[str]) -> str:
    """The primer sentences a reader of a payload using ``constructs`` needs (D13).

    >>> primer(("lists",))
    'GCF-dense is GCF with these additions. A cell [N]: a,b is a list of N values.'
    """
    return " ".join([PRIMER["profile"], *(PRIMER[c] for c in CONSTRUCTS if c in constructs)])
