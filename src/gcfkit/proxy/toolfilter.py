"""Tool filters: which of a server's tools the client may see and call.

A filter is a comma list of glob patterns (``fnmatch``, case-sensitive): a pattern keeps the
tools it matches, ``!pattern`` hides them. A tool is visible when no ``!`` pattern matches it
and, if there is any plain pattern, one of them does; the order does not matter (a hiding
pattern always wins). ``--tools 'git_*,!git_push'`` shows every ``git_`` tool but
``git_push``; ``--tools '!*_write,!delete_*'`` shows all but those.

The one rule is :meth:`ToolFilter.hides`, used twice by the proxy core: a ``tools/list``
result loses the tools it hides (:func:`visible_tools`), and a ``tools/call`` of one is
answered with a JSON-RPC error naming the filter (:func:`refusal`) and never reaches the
server. Several filters (``--tools`` and the policy file's ``tool_filter``) all apply: a tool
is visible only when every one shows it (:class:`ToolFilters`).

>>> f = ToolFilter.parse("git_*,!git_push", source="--tools")
>>> [name for name in ("git_log", "git_push", "read_file") if not f.hides(name)]
['git_log']
>>> f.why("git_push"), f.why("read_file")
("'!git_push' hides it", "no pattern of 'git_*' shows it")
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import ConfigError

__all__ = ["TOOL_HIDDEN", "ToolFilter", "ToolFilters", "refusal", "visible_tools"]

#: The JSON-RPC error code of a call to a hidden tool: invalid params, as MCP answers a call
#: to a tool that does not exist.
TOOL_HIDDEN: Final = -32602


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """One filter: the patterns that show tools and those that hide them, and where it was
    given (``--tools``, the policy's ``tool_filter``), so a refusal can name it."""

    shows: tuple[str, ...]
    hiding: tuple[str, ...]
    source: str = "--tools"

    @classmethod
    def parse(cls, spec: str | Sequence[str], source: str = "--tools") -> ToolFilter:
        """A filter from ``'a*,!b'`` (or the list ``["a*", "!b"]``); raises
        :class:`~gcfkit.errors.ConfigError` when it names no pattern.

        >>> ToolFilter.parse(["read_*", " !read_secret "]).hiding
        ('read_secret',)
        """
        items = spec.split(",") if isinstance(spec, str) else list(spec)
        if not all(isinstance(item, str) for item in items):
            raise ConfigError("invalid_option", f"{source}: patterns must be strings")
        patterns = [item.strip() for item in items if item.strip()]
        shows = tuple(p for p in patterns if not p.startswith("!"))
        hiding = tuple(p[1:].strip() for p in patterns if p.startswith("!"))
        if not patterns or not all(hiding):
            raise ConfigError(
                "invalid_option",
                f"{source} {spec!r}: expected a comma list of tool-name globs, "
                "each maybe preceded by ! to hide it (e.g. 'git_*,!git_push')",
            )
        return cls(shows, hiding, source)

    @property
    def spec(self) -> str:
        """The filter written back as ``--tools`` takes it.

        >>> ToolFilter.parse("a*, !b").spec
        'a*,!b'
        """
        return ",".join([*self.shows, *(f"!{p}" for p in self.hiding)])

    def hides(self, tool: str) -> bool:
        """Whether ``tool`` is hidden (see the module docstring)."""
        return self.why(tool) is not None

    def why(self, tool: str) -> str | None:
        """Why ``tool`` is hidden (the pattern that hides it), or None when it is visible."""
        for pattern in self.hiding:
            if fnmatch.fnmatchcase(tool, pattern):
                return f"'!{pattern}' hides it"
        if self.shows and not any(fnmatch.fnmatchcase(tool, p) for p in self.shows):
            return f"no pattern of {','.join(self.shows)!r} shows it"
        return None


@dataclass(frozen=True, slots=True)
class ToolFilters:
    """Every filter in force (none: every tool is visible).

    >>> both = ToolFilters((ToolFilter.parse("git_*"), ToolFilter.parse("!git_push", "policy")))
    >>> both.hides("git_log"), both.hides("git_push"), ToolFilters().hides("x")
    (False, True, False)
    """

    filters: tuple[ToolFilter, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.filters)

    def plus(self, more: ToolFilter | None) -> ToolFilters:
        """These filters and ``more``."""
        return self if more is None else ToolFilters((*self.filters, more))

    def hides(self, tool: str) -> bool:
        """Whether any filter hides ``tool``."""
        return self.hidden_by(tool) is not None

    def hidden_by(self, tool: str) -> tuple[ToolFilter, str] | None:
        """The first filter that hides ``tool`` and why, or None when it is visible."""
        for f in self.filters:
            why = f.why(tool)
            if why is not None:
                return f, why
        return None


def visible_tools(tools: Iterable[Any], filters: ToolFilters) -> list[Any] | None:
    """A ``tools/list`` result's ``tools`` without the hidden ones; None when nothing is
    hidden (the result then passes as it came). An entry without a string name is kept (it
    names nothing to hide, and the client rejects it as it would without the proxy).

    >>> visible_tools([{"name": "a"}, {"name": "b"}], ToolFilters((ToolFilter.parse("!b"),)))
    [{'name': 'a'}]
    >>> visible_tools([{"name": "a"}], ToolFilters((ToolFilter.parse("!b"),))) is None
    True
    """
    if not filters:
        return None
    kept: list[Any] = []
    hidden = False
    for tool in tools:
        name = tool.get("name") if isinstance(tool, dict) else None
        if isinstance(name, str) and filters.hides(name):
            hidden = True
            continue
        kept.append(tool)
    return kept if hidden else None


def refusal(tool: Any, filters: ToolFilters) -> dict[str, Any] | None:
    """The JSON-RPC ``error`` member for a ``tools/call`` of ``tool``, or None when the call
    may go to the server. A name that is not a string is refused while any filter is on:
    only a name can be shown.

    >>> refusal("git_push", ToolFilters((ToolFilter.parse("git_*,!git_push"),)))["message"]
    "tool 'git_push' is hidden by the gcfkit proxy's tool filter --tools 'git_*,!git_push': \
'!git_push' hides it"
    >>> refusal("git_log", ToolFilters((ToolFilter.parse("git_*,!git_push"),))) is None
    True
    """
    if not filters:
        return None
    if not isinstance(tool, str):
        f, why = filters.filters[0], "a tool is named by a string"
    else:
        found = filters.hidden_by(tool)
        if found is None:
            return None
        f, why = found
    return {
        "code": TOOL_HIDDEN,
        "message": (
            f"tool {tool!r} is hidden by the gcfkit proxy's tool filter {f.source} {f.spec!r}: "
            f"{why}"
        ),
        "data": {"tool": tool, "filter": f.spec, "source": f.source},
    }
