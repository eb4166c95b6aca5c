"""Per-tool policy and format negotiation for the MCP proxy.

A policy decides, for one tool result, which form the proxy may deliver:

* ``"gcf"``: GCF generic when it has fewer tokens than compact JSON, else compact JSON when
  that is smaller than the original, else the original;
* ``"json"``: compact JSON when smaller than the original (a pure minifier);
* ``"off"``: the original, untouched.

plus whether text blocks may be joined (``join``), whether repeated calls may be sent as
deltas (``delta``, with an optional identity column ``key``), and a minimum text size
(``min_bytes``) below which a block is left alone, and whether the tool's results feed a UI
(``ui``: their ``structuredContent`` is never flattened, :mod:`gcfkit.proxy.structured`).

A policy file is JSON or TOML (TOML needs Python 3.11+ or ``tomli``)::

    {"defaults": {"format": "gcf", "join": true, "delta": false, "min_bytes": 0},
     "tools": {"read_*": {"format": "off"},
               "list_orders": {"delta": true, "key": "order_id"},
               "get_page": {"file": false},
               "render_chart": {"ui": true}},
     "file_tools": ["fetch_doc"],
     "not_file_tools": ["get_report_*"],
     "tool_filter": "git_*,!git_push"}

Tools are matched by exact name first, then by the globs of ``tools`` in file order (the
first match wins). Tools that read files are never rewritten, so what the agent reads is
byte-for-byte what is on disk, unless the policy names that exact tool with an explicit
``format``. Which tools read files is the policy's word first (a tool's ``file``, then
``not_file_tools``, then ``file_tools``, names or globs), then the tool's own name,
description and input schema (:mod:`gcfkit.proxy.toolkind`: ``read-file``, ``readFile``,
``get_file_text_by_path``, shells like ``bash``...), erring on the side of leaving text
alone.

``tool_filter`` (a comma list, or a list, of tool-name globs, ``!`` hiding) says which tools
the client sees and may call (:mod:`gcfkit.proxy.toolfilter`); ``--tools`` adds another.

>>> p = Policy.from_mapping({"tools": {"list_*": {"delta": True}}})
>>> p.for_tool("list_orders").delta, p.for_tool("read_file").format
(True, 'off')
"""

from __future__ import annotations

import fnmatch
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, Literal, cast

from ..errors import ConfigError
from .toolfilter import ToolFilter, ToolFilters
from .toolkind import looks_like_file_read

__all__ = [
    "CAPABILITY",
    "DEFAULT_FILE_TOOLS",
    "FORMATS",
    "IDENTITY_KEYS",
    "OUTPUT_FORMATS",
    "Format",
    "OutputFormat",
    "Policy",
    "ToolPolicy",
    "cap_format",
    "load_policy",
    "output_format_capability",
]

Format = Literal["gcf", "json", "off"]

#: Every format, most conservative first; :func:`cap_format` relies on this order.
FORMATS: Final[tuple[Format, ...]] = ("off", "json", "gcf")

#: Tools whose results are file contents. An agent edits files by quoting what it read, so
#: those results must stay byte-faithful even when the file happens to be JSON.
DEFAULT_FILE_TOOLS: Final[tuple[str, ...]] = (
    "read_file",
    "read_text_file",
    "read_multiple_files",
    "read_media_file",
    "get_file_contents",
    "view",
    "view_file",
    "cat",
    "head",
    "tail",
    "open_file",
)

#: Identity columns tried, in order, to make a record array a keyed set (spec §10a.1).
IDENTITY_KEYS: Final[tuple[str, ...]] = ("id", "key", "uuid", "sha", "path", "name")

#: How many tools' answers a policy remembers (:attr:`Policy._said`).
_SAID_MAX: Final = 1024
_TOOL_FIELDS: Final = frozenset({"format", "join", "delta", "min_bytes", "key", "file", "ui"})


def cap_format(a: Format, b: Format) -> Format:
    """The more conservative of two formats (``off`` < ``json`` < ``gcf``).

    >>> cap_format("gcf", "json")
    'json'
    """
    return a if FORMATS.index(a) <= FORMATS.index(b) else b


#: The key under a client's ``capabilities.experimental`` that names its output format.
CAPABILITY: Final = "output_format"

#: What a client may declare it wants (``off`` is the proxy's own setting, not a client's).
OutputFormat = Literal["gcf", "json"]
OUTPUT_FORMATS: Final[tuple[OutputFormat, ...]] = ("gcf", "json")


def output_format_capability(experimental: Any) -> OutputFormat | None:
    """The output format a client declared under ``capabilities.experimental``, if any.

    The MCP schema wants objects under ``experimental``, so the canonical form is
    ``{"output_format": {"format": "json"}}``; the bare ``{"output_format": "json"}`` that
    some clients send is understood too. Anything else declares nothing.

    >>> output_format_capability({"output_format": {"format": "json"}})
    'json'
    >>> output_format_capability({"output_format": "GCF"}), output_format_capability(None)
    ('gcf', None)
    """
    if not isinstance(experimental, Mapping):
        return None
    raw = experimental.get(CAPABILITY)
    if isinstance(raw, Mapping):
        raw = raw.get("format")
    if isinstance(raw, str) and raw.lower() in ("gcf", "json"):
        return "gcf" if raw.lower() == "gcf" else "json"
    return None


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """What the proxy may do with one tool's results.

    >>> ToolPolicy().format, ToolPolicy().join
    ('gcf', True)
    """

    format: Format = "gcf"
    join: bool = True
    delta: bool = False
    min_bytes: int = 0
    key: str | None = None
    #: Whether the tool reads files, as the policy says (None: decided from the tool).
    file: bool | None = None
    #: Whether the tool's results feed a UI: its ``structuredContent`` and ``outputSchema``
    #: stay as the server sent them for every client (:mod:`gcfkit.proxy.structured`).
    ui: bool = False


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: str
    fields: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Policy:
    """A resolved policy: defaults, per-tool rules and the file-reading tools.

    >>> Policy().for_tool("search").format
    'gcf'
    """

    defaults: ToolPolicy = field(default_factory=ToolPolicy)
    rules: tuple[_Rule, ...] = ()
    file_tools: tuple[str, ...] = DEFAULT_FILE_TOOLS
    not_file_tools: tuple[str, ...] = ()
    #: Which tools the client may see and call (:mod:`gcfkit.proxy.toolfilter`).
    tool_filter: ToolFilters = field(default_factory=ToolFilters)
    #: What :meth:`for_tool` and :meth:`is_file_tool` (by name) said per tool: every result
    #: asks, and the answer is the policy's (frozen) alone. Bounded: cleared when full.
    _said: dict[tuple[str, bool | str | None], Any] = field(
        default_factory=dict, init=False, compare=False, hash=False, repr=False
    )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], base: ToolPolicy | None = None) -> Policy:
        """Build a policy from a parsed policy file; ``base`` holds the command-line defaults.

        >>> Policy.from_mapping({"defaults": {"format": "json"}}).for_tool("x").format
        'json'
        """
        if not isinstance(data, Mapping):
            raise ConfigError("invalid_option", "a policy must be a JSON object / TOML table")
        known = {"version", "defaults", "tools", "file_tools", "not_file_tools", "tool_filter"}
        unknown = set(data) - known
        if unknown:
            raise ConfigError("invalid_option", f"unknown policy section(s): {sorted(unknown)}")
        defaults = base or ToolPolicy()
        raw_defaults = data.get("defaults", {})
        defaults = _apply(defaults, _check_fields("defaults", raw_defaults))
        tools = data.get("tools", {})
        if not isinstance(tools, Mapping):
            raise ConfigError("invalid_option", "policy 'tools' must map tool names to tables")
        rules = tuple(
            _Rule(str(name), _check_fields(f"tools.{name}", spec)) for name, spec in tools.items()
        )
        file_tools = DEFAULT_FILE_TOOLS + _names(data, "file_tools")
        not_file_tools = _names(data, "not_file_tools")
        tool_filter = ToolFilters()
        if "tool_filter" in data:
            spec = data["tool_filter"]
            if not isinstance(spec, (str, list)):
                raise ConfigError("invalid_option", "policy 'tool_filter' must be a string or list")
            tool_filter = tool_filter.plus(ToolFilter.parse(spec, "policy tool_filter"))
        return cls(
            defaults=defaults,
            rules=rules,
            file_tools=file_tools,
            not_file_tools=not_file_tools,
            tool_filter=tool_filter,
        )

    def with_filter(self, more: ToolFilter | None) -> Policy:
        """This policy with one more tool filter (``--tools``): a tool is then visible only
        when every filter shows it.

        >>> Policy().with_filter(ToolFilter.parse("!git_push")).tool_filter.hides("git_push")
        True
        """
        return replace(self, tool_filter=self.tool_filter.plus(more))

    def _match(self, tool: str) -> _Rule | None:
        for rule in self.rules:
            if rule.pattern == tool:
                return rule
        for rule in self.rules:
            if fnmatch.fnmatchcase(tool, rule.pattern):
                return rule
        return None

    @property
    def may_send_gcf(self) -> bool:
        """Whether any tool may get GCF under this policy (else no primer is needed).

        >>> Policy.from_mapping({"defaults": {"format": "json"}}).may_send_gcf
        False
        """
        if self.defaults.format == "gcf":
            return True
        return any(rule.fields.get("format") == "gcf" for rule in self.rules)

    def is_file_tool(self, tool: str, definition: Mapping[str, Any] | None = None) -> bool:
        """Whether ``tool`` returns file contents (see the module docstring); ``definition``
        is its ``tools/list`` entry when the proxy has seen one.

        >>> Policy().is_file_tool("read_text_file"), Policy().is_file_tool("readFile")
        (True, True)
        >>> Policy.from_mapping({"not_file_tools": ["read*"]}).is_file_tool("readFile")
        False
        """
        if definition is None:
            known = self._said.get((tool, "file"))
            if known is None:
                known = self._remember((tool, "file"), self._is_file_tool(tool, None))
            return bool(known)
        return self._is_file_tool(tool, definition)

    def _is_file_tool(self, tool: str, definition: Mapping[str, Any] | None) -> bool:
        rule = self._match(tool)
        said = rule.fields.get("file") if rule is not None else self.defaults.file
        if said is None and rule is not None:
            said = self.defaults.file
        if isinstance(said, bool):
            return said
        if _listed(tool, self.not_file_tools):
            return False
        if _listed(tool, self.file_tools):
            return True
        return looks_like_file_read(tool, definition)

    def for_tool(self, tool: str, *, file: bool | None = None) -> ToolPolicy:
        """The effective policy for ``tool``; ``file``: whether it reads files, when the
        caller has decided it (:meth:`is_file_tool` with its definition), else by name.

        >>> Policy().for_tool("read_file").format, Policy().for_tool("list_x").format
        ('off', 'gcf')
        """
        known = self._said.get((tool, file))
        if known is None:
            known = self._remember((tool, file), self._for_tool(tool, file))
        policy: ToolPolicy = known
        return policy

    def _for_tool(self, tool: str, file: bool | None) -> ToolPolicy:
        rule = self._match(tool)
        resolved = self.defaults if rule is None else _apply(self.defaults, rule.fields)
        explicit = rule is not None and rule.pattern == tool and "format" in rule.fields
        is_file = self.is_file_tool(tool) if file is None else file
        if is_file and not explicit:
            resolved = replace(resolved, format="off")
        return resolved

    def _remember(self, key: tuple[str, bool | str | None], value: Any) -> Any:
        if len(self._said) >= _SAID_MAX:
            self._said.clear()
        self._said[key] = value
        return value


def _listed(tool: str, patterns: Sequence[str]) -> bool:
    return any(tool == p or fnmatch.fnmatchcase(tool, p) for p in patterns)


def _names(data: Mapping[str, Any], section: str) -> tuple[str, ...]:
    raw = data.get(section, ())
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        raise ConfigError("invalid_option", f"policy '{section}' must be a list")
    if not all(isinstance(x, str) for x in raw):
        raise ConfigError("invalid_option", f"policy '{section}' must list strings")
    return tuple(raw)


def _check_fields(where: str, spec: Any) -> Mapping[str, Any]:
    if not isinstance(spec, Mapping):
        raise ConfigError("invalid_option", f"policy '{where}' must be a table")
    unknown = set(spec) - _TOOL_FIELDS
    if unknown:
        raise ConfigError("invalid_option", f"policy '{where}': unknown field(s) {sorted(unknown)}")
    if "format" in spec and spec["format"] not in FORMATS:
        raise ConfigError("invalid_option", f"policy '{where}': format must be gcf, json or off")
    for name in ("join", "delta", "file", "ui"):
        if name in spec and not isinstance(spec[name], bool):
            raise ConfigError("invalid_option", f"policy '{where}': {name} must be a boolean")
    if "min_bytes" in spec:
        v = spec["min_bytes"]
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ConfigError("invalid_option", f"policy '{where}': min_bytes must be >= 0")
    if "key" in spec and not (spec["key"] is None or isinstance(spec["key"], str)):
        raise ConfigError("invalid_option", f"policy '{where}': key must be a string")
    return dict(spec)


def _apply(base: ToolPolicy, fields: Mapping[str, Any]) -> ToolPolicy:
    return replace(base, **{k: v for k, v in fields.items() if k in _TOOL_FIELDS})


def _load_toml(text: str, path: Path) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        try:
            import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise ConfigError(
                "invalid_option",
                f"{path}: TOML policies need Python 3.11+ or the 'tomli' package; use JSON",
            ) from None
    try:
        return tomllib.loads(text)
    except ValueError as e:
        raise ConfigError("invalid_option", f"{path}: invalid TOML: {e}") from None


def load_policy(path: str | Path, base: ToolPolicy | None = None) -> Policy:
    """Read a JSON or TOML policy file (by extension; ``.toml`` is TOML, anything else JSON).

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     _ = f.write('{"tools": {"list_*": {"format": "json"}}}')
    >>> load_policy(f.name).for_tool("list_x").format
    'json'
    >>> os.unlink(f.name)
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError("invalid_option", f"cannot read policy {p}: {e.strerror}") from None
    data: Any
    if p.suffix.lower() == ".toml":
        data = _load_toml(text, p)
    else:
        try:
            data = json.loads(text)
        except ValueError as e:
            raise ConfigError("invalid_option", f"{p}: invalid JSON: {e}") from None
    return Policy.from_mapping(cast("Mapping[str, Any]", data), base)
