"""Wrap (and restore) MCP servers in client configs so they run behind ``gcfkit proxy``: stdio
ones (``command``/``args``) and Streamable HTTP ones (``url``/``headers``, wrapped as
``gcfkit proxy --upstream URL``).

Which files and where in them: :mod:`gcfkit.clients.locations`; what a wrapped entry looks
like: :mod:`gcfkit.clients.entries`. (``--name NAME`` lets the savings ledger use the name the
config knows the server by.) The rest of the file keeps its bytes
(:mod:`gcfkit.clients.jsondoc`: a file in a standard layout is rewritten in its own indent,
key order, newline at the end, CRLF and BOM; in one laid out by hand only the values that
changed are rewritten), so an untouched part comes out byte-identical.

The original entry is kept in a sidecar, ``<state dir>/installed.json`` (see
:func:`gcfkit.paths.state_dir`), not inside the config: clients that validate entries
strictly never see an unknown key. Uninstall puts the stored original back exactly when the
wrapper is as gcfkit left it; if the wrapper was edited since (or the sidecar is gone), it
unwraps what is there instead: the command after ``--`` becomes ``command``/``args`` again and
the user's other edits are kept.

Every write makes a timestamped backup first, under ``<state dir>/backups/<UTC time>/`` mirroring
the config's absolute path, then replaces the file atomically (temporary file in the same
directory + rename, same permissions; a symlinked config keeps its link). A file that is not
valid JSON, has duplicate keys or comments, or has the wrong shape is never written: the
operation stops with :class:`~gcfkit.errors.ConfigError` ``malformed_config``.

Configs change under us (clients rewrite them, people edit them): a file that no longer holds
what the edit was planned from at the moment the new one takes its place is left as it is
(``io_error``, "changed while gcfkit was editing it"; see :func:`_write_atomic`). Two gcfkit
runs at once take turns on a lock in the state directory, so neither plans from a stale file
nor drops the other's sidecar record.

Planning (:func:`plan_install`, :func:`plan_uninstall`) reads and decides; only
:func:`apply_plans` writes.

>>> import json, pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> cfg = d / "mcp.json"
>>> _ = cfg.write_text(json.dumps({"mcpServers": {"time": {"command": "uvx",
...     "args": ["mcp-server-time"]}}}, indent=2) + "\\n")
>>> plans = install_mcp("time", config=cfg, launcher=["gcfkit"], env={"GCFKIT_STATE_DIR": str(d)})
>>> json.loads(cfg.read_text())["mcpServers"]["time"]["args"]
['proxy', '--name', 'time', '--', 'uvx', 'mcp-server-time']
>>> _ = uninstall_mcp("time", config=cfg, env={"GCFKIT_STATE_DIR": str(d)})
>>> json.loads(cfg.read_text())["mcpServers"]["time"]["args"]
['mcp-server-time']
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import json
import os
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Final

from ..errors import ConfigError
from ..jsonio import same_value
from ..paths import state_dir
from .entries import (
    WrappedParts,
    check_wrappable,
    default_launcher,
    split_wrapped,
    unwrap_entry,
    wrap_entry,
)
from .jsondoc import JsonObject
from .locations import (
    ConfigDocument,
    ConfigLocation,
    container_keys,
    load_config,
    select_locations,
    servers_of,
)
from .shapes import EntryShape
from .tomldoc import TomlDocument

__all__ = [
    "RECORDS_FILENAME",
    "Action",
    "FilePlan",
    "apply_plans",
    "install_mcp",
    "plan_install",
    "plan_uninstall",
    "uninstall_mcp",
]

RECORDS_FILENAME = "installed.json"
_RECORDS_VERSION = 1


# --- the sidecar of original entries ----------------------------------------------------


def _record_key(path: Path, keys: Sequence[str], name: str) -> str:
    return json.dumps([os.path.realpath(path), list(keys), name])


@dataclass
class _Records:
    path: Path
    entries: dict[str, JsonObject] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> _Records:
        records = cls(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return records
        except (OSError, ValueError) as e:
            # Uninstall still works without it (it unwraps the entry), so warn and go on.
            print(f"gcfkit: warning: ignoring unreadable {path}: {e}", file=sys.stderr)
            return records
        servers = data.get("servers") if isinstance(data, dict) else None
        for item in servers if isinstance(servers, list) else []:
            if isinstance(item, dict) and isinstance(item.get("key"), str):
                records.entries[item["key"]] = item
        return records

    def save(self) -> None:
        payload = {"version": _RECORDS_VERSION, "servers": list(self.entries.values())}
        text = json.dumps(payload, indent=2, ensure_ascii=False) + "\n"
        # The originals hold env values, which are often secrets.
        _write_atomic(self.path, text.encode("utf-8"), expected=None, mode=0o600)


# --- plans: what would change, applied atomically per file ------------------------------


@dataclass(frozen=True)
class Action:
    """What happens to one server: ``wrapped``, ``rewrapped``, ``already-wrapped``,
    ``restored`` (the stored original), ``unwrapped`` (the wrapper was edited, or no stored
    original) or ``not-wrapped``."""

    location: ConfigLocation
    name: str
    action: str

    @property
    def changes(self) -> bool:
        """Whether this action rewrites the file."""
        return self.action in ("wrapped", "rewrapped", "restored", "unwrapped")


@dataclass
class FilePlan:
    """Every action on one config file, with the file's text before and after."""

    path: Path
    before: str
    after: str
    actions: list[Action] = field(default_factory=list)
    backup: Path | None = None
    written: bool = False
    _raw: bytes | None = field(default=None, repr=False)
    _new_data: JsonObject = field(default_factory=dict, repr=False)
    _record_updates: dict[str, JsonObject | None] = field(default_factory=dict, repr=False)
    # A TOML file's original spelling of each restored entry's values (Sources).
    _sources: dict[tuple[str, ...], dict[str, str]] = field(default_factory=dict, repr=False)

    @property
    def changed(self) -> bool:
        """Whether the file's content would change."""
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff of the file, before and after."""
        return "".join(
            difflib.unified_diff(
                self.before.splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                fromfile=str(self.path),
                tofile=f"{self.path} (after)",
            )
        )


def _find(
    name: str, locations: Sequence[ConfigLocation], docs: dict[Path, ConfigDocument]
) -> list[ConfigLocation]:
    """Where ``name`` is configured; the files read on the way are kept in ``docs``."""
    found: list[ConfigLocation] = []
    for loc in locations:
        try:
            doc = docs.get(loc.path)
            if doc is None:
                doc = docs[loc.path] = load_config(loc.path, jsonc=loc.kind.jsonc)
            if doc.raw is not None and name in servers_of(doc, loc):
                found.append(loc)
        except ConfigError as e:
            # NAME might be in the broken file, so guessing past it could wrap the wrong copy.
            if e.code == "malformed_config" and len(locations) > 1:
                raise ConfigError(
                    e.code, f"{e.detail} (or leave it out with --client, --scope or --config)"
                ) from None
            raise
    return found


def _not_found(name: str, locations: Sequence[ConfigLocation]) -> ConfigError:
    looked = "\n  ".join(loc.describe() for loc in locations) or "(no config selected)"
    return ConfigError(
        "server_not_found",
        f"no MCP server named {name!r} in the configs looked at:\n  {looked}\n"
        "(see `gcfkit mcp-status`; --config PATH names another file)",
    )


def _ambiguous(name: str, found: Sequence[ConfigLocation]) -> ConfigError:
    where = "\n  ".join(loc.describe() for loc in found)
    return ConfigError(
        "ambiguous_server",
        f"server {name!r} is in several configs:\n  {where}\n"
        "choose with --client (all for every one) and/or --scope",
    )


def _plan_for(doc: ConfigDocument, plans: dict[Path, FilePlan]) -> tuple[FilePlan, JsonObject]:
    plan = plans.get(doc.path)
    if plan is None:
        plan = FilePlan(doc.path, doc.text, doc.text, _raw=doc.raw)
        plan._new_data = copy.deepcopy(doc.data)
        plans[doc.path] = plan
    return plan, plan._new_data


def _names(names: str | Sequence[str]) -> list[str]:
    """One name or several, each once, in order."""
    return list(dict.fromkeys([names] if isinstance(names, str) else names))


def plan_install(
    names: str | Sequence[str],
    locations: Sequence[ConfigLocation],
    *,
    explicit: bool,
    launcher: Sequence[str] | None = None,
    proxy_args: Sequence[str] | None = None,
    name_option: bool = True,
    state: Path | None = None,
) -> list[FilePlan]:
    """Plan wrapping the server ``names`` (one name, or several); nothing is written (see
    :func:`apply_plans`).

    ``explicit`` (a ``--client`` was given) allows acting on several configs at once; without
    it, each name must be in exactly one. ``proxy_args=None`` keeps the options of an already
    wrapped entry; a sequence replaces them. ``name_option`` puts ``--name NAME`` first among
    the proxy options (unless they have a ``--name``), so the savings ledger and ``gcfkit
    stats`` show the name the config uses rather than the server's self-reported one. Every
    name is checked before anything is planned to be written: one that is missing or
    ambiguous stops the lot.
    """
    launcher = list(launcher) if launcher else default_launcher()
    docs: dict[Path, ConfigDocument] = {}
    wanted: list[tuple[str, ConfigLocation]] = []
    for name in _names(names):
        found = _find(name, locations, docs)
        if not found:
            raise _not_found(name, locations)
        if len(found) > 1 and not explicit:
            raise _ambiguous(name, found)
        wanted += [(name, loc) for loc in found]
    records = _Records.load((state or state_dir()) / RECORDS_FILENAME)
    plans: dict[Path, FilePlan] = {}
    for name, loc in wanted:
        options = _proxy_options(name, proxy_args or (), name_option)
        doc = docs[loc.path]
        shape = loc.kind.shape
        own = servers_of(doc, loc)[name]
        entry = check_wrappable(
            shape.to_common(own) if isinstance(own, dict) else own, name, loc.describe()
        )
        refusal = shape.refusal(own)
        if refusal is not None:
            raise ConfigError(
                "unsupported_server",
                f"server {name!r} in {loc.describe()}: {refusal}; it was left as it was",
            )
        keys = container_keys(doc, loc)
        assert keys is not None  # found means the container exists
        key = _record_key(loc.path, keys, name)
        plan, data = _plan_for(doc, plans)
        parts = split_wrapped(entry, [launcher, *_recorded_launchers(records, key, shape)])
        if parts is not None:
            if proxy_args is None or tuple(options) == parts.proxy_args:
                plan.actions.append(Action(loc, name, "already-wrapped"))
                continue
            inner = unwrap_entry(entry, parts)
            new = shape.from_common(wrap_entry(inner, list(parts.launcher), options))
            action = "rewrapped"
            original = records.entries.get(key, {}).get("original", shape.from_common(inner))
        else:
            new = shape.from_common(wrap_entry(entry, launcher, options))
            action = "wrapped"
            original = own
        servers_of(doc, loc, data)[name] = new
        plan.actions.append(Action(loc, name, action))
        record: JsonObject = {
            "key": key,
            "config": str(loc.path),
            "client": loc.client,
            "scope": loc.scope,
            "name": name,
            "original": original,
            "wrapped": new,
        }
        if isinstance(doc, TomlDocument):
            # TOML spells a value many ways (a multi-line array, a quoted key): keep how
            # this file did, so that uninstall gives its bytes back.
            old = records.entries.get(key, {}).get("source") if action == "rewrapped" else None
            record["source"] = old if isinstance(old, dict) else doc.sources((*keys, name))
        plan._record_updates[key] = record
    return _finish(plans, docs)


def _proxy_options(name: str, proxy_args: Sequence[str], name_option: bool) -> list[str]:
    """The proxy options to write, ``--name NAME`` first unless there is one already.

    >>> _proxy_options("git", ["--delta"], True), _proxy_options("-git", [], True)
    (['--name', 'git', '--delta'], ['--name=-git'])
    """
    options = list(proxy_args)
    if name_option and not any(o == "--name" or o.startswith("--name=") for o in options):
        # A name that starts with "-" would be read as an option: the proxy refused to
        # start with "--name -git". Attached, the value is never an option.
        options = [f"--name={name}" if name.startswith("-") else "--name", *options]
        if not name.startswith("-"):
            options.insert(1, name)
    return options


def _recorded_launchers(records: _Records, key: str, shape: EntryShape) -> list[list[str]]:
    item = records.entries.get(key)
    wrapped = item.get("wrapped") if item else None
    if not isinstance(wrapped, dict):
        return []
    wrapped = shape.to_common(wrapped)
    command = wrapped.get("command")
    args = wrapped.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list) or "proxy" not in args:
        return []
    return [[command, *args[: args.index("proxy")]]]


def plan_uninstall(
    names: str | Sequence[str],
    locations: Sequence[ConfigLocation],
    *,
    explicit: bool,
    state: Path | None = None,
) -> list[FilePlan]:
    """Plan restoring the server ``names`` (one name, or several); nothing is written (see
    :func:`apply_plans`).

    Without ``explicit``, only configs where a name is wrapped count toward ambiguity.
    """
    docs: dict[Path, ConfigDocument] = {}
    records = _Records.load((state or state_dir()) / RECORDS_FILENAME)
    wanted: list[tuple[str, ConfigLocation, WrappedParts | None, str]] = []
    for name in _names(names):
        found = _find(name, locations, docs)
        if not found:
            raise _not_found(name, locations)
        seen: list[tuple[str, ConfigLocation, WrappedParts | None, str]] = []
        for loc in found:
            doc = docs[loc.path]
            entry = servers_of(doc, loc)[name]
            keys = container_keys(doc, loc)
            assert keys is not None
            key = _record_key(loc.path, keys, name)
            shape = loc.kind.shape
            parts = (
                split_wrapped(shape.to_common(entry), _recorded_launchers(records, key, shape))
                if isinstance(entry, dict)
                else None
            )
            seen.append((name, loc, parts, key))
        wrapped_locs = [loc for _, loc, parts, _ in seen if parts is not None]
        if not explicit and len(wrapped_locs) > 1:
            raise _ambiguous(name, wrapped_locs)
        wanted += [s for s in seen if explicit or not wrapped_locs or s[2] is not None]
    plans: dict[Path, FilePlan] = {}
    for name, loc, parts, key in wanted:
        doc = docs[loc.path]
        plan, data = _plan_for(doc, plans)
        if parts is None:
            plan.actions.append(Action(loc, name, "not-wrapped"))
            continue
        shape = loc.kind.shape
        entry = servers_of(doc, loc)[name]
        keys = container_keys(doc, loc) or ()
        item = records.entries.get(key)
        original = item.get("original") if item else None
        if (
            item
            and isinstance(original, dict)
            and same_value(entry, item.get("wrapped"), number_types=True)
        ):
            new, action = copy.deepcopy(original), "restored"
            source = item.get("source")
            if isinstance(source, dict):
                table = (*keys, name)
                plan._sources[table] = source
        else:
            had_args = not isinstance(original, dict) or "args" in shape.to_common(original)
            common = unwrap_entry(shape.to_common(entry), parts, keep_empty_args=had_args)
            new, action = shape.from_common(common), "unwrapped"
        servers_of(doc, loc, data)[name] = new
        plan.actions.append(Action(loc, name, action))
        plan._record_updates[key] = None
    return _finish(plans, docs)


def _finish(plans: dict[Path, FilePlan], docs: dict[Path, ConfigDocument]) -> list[FilePlan]:
    for path, plan in plans.items():
        if any(a.changes for a in plan.actions):
            doc = docs[path]
            if isinstance(doc, TomlDocument):
                plan.after = doc.dump(plan._new_data, plan._sources)
            else:
                plan.after = doc.dump(plan._new_data)
    return list(plans.values())


def _backup(path: Path, state: Path, stamp: str) -> Path:
    target = Path(os.path.realpath(path))
    drive = target.drive.replace(":", "").strip("\\/") or ""
    relative = target.relative_to(target.anchor)
    dest = state / "backups" / stamp / drive / relative
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    shutil.copy2(target, dest)
    return dest


def _changed(path: Path) -> ConfigError:
    # A client (Claude Code rewrites ~/.claude.json often) or an editor changed it under us.
    return ConfigError(
        "io_error",
        f"{path} changed while gcfkit was editing it; nothing was written, run the "
        "command again (ideally with the client closed)",
    )


def _snapshot(path: Path | str) -> tuple[int, bytes] | None:
    """(inode, bytes) of a file, or None when there is none."""
    try:
        with open(path, "rb") as f:
            return os.fstat(f.fileno()).st_ino, f.read()
    except FileNotFoundError:
        return None


def _write_atomic(path: Path, data: bytes, *, expected: bytes | None, mode: int | None) -> None:
    """Replace ``path`` with ``data`` atomically (temp file, fsync, rename). With ``expected``
    (the bytes the edit was planned from), the file must still be the one that held them
    when the new one takes its place, or nothing is written and the user's version stays.

    The check is made at the last moment: on Linux the new file and the config swap places
    atomically (``renameat2(RENAME_EXCHANGE)``) and the file displaced is the one checked
    (same inode, same bytes), so an edit landing at any point before the swap is seen and
    put back (:func:`_put_back`). Where there is no such swap the file is re-read just
    before the rename, which leaves a window of microseconds instead of a write and fsync.
    """
    target = Path(os.path.realpath(path))
    try:
        original: tuple[int, bytes] | None = None
        if expected is not None:
            original = _snapshot(target)
            if original is None or original[1] != expected:
                raise _changed(path)
        if mode is None:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
            if original is None:
                os.replace(tmp, target)
            else:
                _commit(tmp, target, original, data, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:
        raise ConfigError("io_error", f"cannot write {path}: {e.strerror or e}") from None


def _commit(tmp: str, target: Path, original: tuple[int, bytes], data: bytes, shown: Path) -> None:
    """Put ``tmp`` (holding ``data``) in ``target``'s place if ``target`` is still the file
    ``original`` describes; otherwise leave the user's version and raise "changed"."""
    ours = os.stat(tmp).st_ino
    if not _exchange(tmp, target):
        if _snapshot(target) != original:
            raise _changed(shown)
        os.replace(tmp, target)
        return
    # tmp now names what the config was at the instant of the swap.
    displaced = os.stat(tmp).st_ino
    if displaced == original[0] and _snapshot(tmp) == original:
        os.unlink(tmp)
        return
    _put_back(tmp, target, ours, data, displaced)
    raise _changed(shown)


def _put_back(tmp: str, target: Path, ours: int, data: bytes, displaced: int) -> None:
    """Someone wrote the config after gcfkit read it, and it was just swapped out to
    ``tmp``: swap it back. What comes out is gcfkit's file, or an older version than what
    goes in, unless the user wrote yet again in between; then that newest write comes out
    and goes back in, and so on. The file left at ``tmp`` at the end is one nobody needs."""
    seen = {displaced}
    for _ in range(16):
        if not _exchange(tmp, target):
            os.replace(tmp, target)
            return
        out = _snapshot(tmp)
        if out is None:
            return
        if out[0] == ours and out[1] == data:
            break  # gcfkit's own file, untouched: the user's version is back in place
        if out[0] in seen and out[0] != ours:
            break  # a version that already came out once: older than what is in place
        seen.add(out[0])  # written after the swap (or into gcfkit's file): the newest
    with contextlib.suppress(OSError):
        os.unlink(tmp)


_RENAME_EXCHANGE: Final = 2
_AT_FDCWD: Final = -100
_renameat2: Any = None  # None: not looked up yet; False: not available


def _exchange(a: str | Path, b: str | Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False when the
    platform, libc or file system cannot, so the caller falls back to re-check + rename."""
    global _renameat2
    if _renameat2 is None:
        _renameat2 = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                fn = libc.renameat2
                fn.argtypes = [
                    ctypes.c_int,
                    ctypes.c_char_p,
                    ctypes.c_int,
                    ctypes.c_char_p,
                    ctypes.c_uint,
                ]
                fn.restype = ctypes.c_int
                _renameat2 = fn
    if _renameat2 is False:
        return False
    ok = _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(ok == 0)


@contextlib.contextmanager
def _state_lock(state: Path) -> Iterator[None]:
    """Hold ``<state>/install.lock`` while reading, planning and writing configs and the
    sidecar, so two gcfkit runs at once (processes or threads) take turns instead of losing
    each other's records. Reentrant within a thread; across processes it is ``flock``, which
    Windows lacks (there only threads take turns)."""
    key = os.path.realpath(state)
    with _LOCKS_GUARD:
        local = _LOCKS.setdefault(key, threading.RLock())
    if not local.acquire(timeout=_LOCK_TIMEOUT):
        raise _busy(state)
    try:
        if key in _HELD:  # this thread holds it already, further up the stack
            yield
            return
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            fcntl = None  # type: ignore[assignment]
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(state / "install.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + _LOCK_TIMEOUT
            while fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise _busy(state) from None
                    time.sleep(0.01)
            _HELD.add(key)
            try:
                yield
            finally:
                _HELD.discard(key)
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    finally:
        local.release()


def _busy(state: Path) -> ConfigError:
    return ConfigError(
        "io_error",
        f"another gcfkit is editing MCP configs (lock {state / 'install.lock'}); try again "
        "when it is done",
    )


# Per state dir: a thread lock (flock does not exclude threads sharing a process) and the
# set of locks this process holds (only the thread holding the RLock can be in it).
_LOCKS: dict[str, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()
_HELD: set[str] = set()
_LOCK_TIMEOUT: Final = 30.0


def apply_plans(plans: Sequence[FilePlan], *, state: Path | None = None) -> None:
    """Write planned changes: backup, atomic replace, then the sidecar of originals.

    Files whose content does not change are neither backed up nor written.
    """
    state = state or state_dir()
    with _state_lock(state):
        _apply(plans, state)


def _apply(plans: Sequence[FilePlan], state: Path) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    records: _Records | None = None
    for plan in plans:
        if not plan.changed:
            continue
        try:
            plan.backup = _backup(plan.path, state, stamp)
        except OSError as e:
            raise ConfigError(
                "io_error", f"cannot back up {plan.path} ({e.strerror or e}); nothing was written"
            ) from None
        _write_atomic(plan.path, plan.after.encode("utf-8"), expected=plan._raw, mode=None)
        plan.written = True
        if records is None:
            records = _Records.load(state / RECORDS_FILENAME)
        for key, item in plan._record_updates.items():
            if item is None:
                records.entries.pop(key, None)
            else:
                records.entries[key] = item
        # Saved per file, so a failure on a later file cannot orphan this one's original.
        records.save()


# --- the front doors --------------------------------------------------------------------


def install_mcp(
    name: str | Sequence[str],
    *,
    client: str | None = None,
    scope: str | None = None,
    config: Path | str | None = None,
    proxy_args: Sequence[str] | None = None,
    launcher: Sequence[str] | None = None,
    name_option: bool = True,
    dry_run: bool = False,
    home: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> list[FilePlan]:
    """Wrap server ``name`` (or each of several names) with ``gcfkit proxy`` where it is
    configured; return the plans.

    See the module docstring for the rules. ``dry_run`` plans without writing. Raises
    :class:`~gcfkit.errors.ConfigError` (``server_not_found``, ``ambiguous_server``,
    ``unsupported_server``, ``malformed_config``, ``io_error``); nothing is written when it
    does.
    """

    def plan(locations: list[ConfigLocation], explicit: bool, state: Path) -> list[FilePlan]:
        return plan_install(
            name,
            locations,
            explicit=explicit,
            launcher=launcher,
            proxy_args=proxy_args,
            name_option=name_option,
            state=state,
        )

    return _plan_and_apply(
        plan,
        dry_run,
        client=client,
        scope=scope,
        config=config,
        home=home,
        cwd=cwd,
        env=env,
        platform=platform,
    )


def uninstall_mcp(
    name: str | Sequence[str],
    *,
    client: str | None = None,
    scope: str | None = None,
    config: Path | str | None = None,
    dry_run: bool = False,
    home: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> list[FilePlan]:
    """Restore server ``name`` (or each of several) where it is wrapped; return the plans
    (see :func:`install_mcp`).

    An entry that is not wrapped is left alone (its action is ``not-wrapped``).
    """

    def plan(locations: list[ConfigLocation], explicit: bool, state: Path) -> list[FilePlan]:
        return plan_uninstall(name, locations, explicit=explicit, state=state)

    return _plan_and_apply(
        plan,
        dry_run,
        client=client,
        scope=scope,
        config=config,
        home=home,
        cwd=cwd,
        env=env,
        platform=platform,
    )


def _plan_and_apply(
    plan: Callable[[list[ConfigLocation], bool, Path], list[FilePlan]],
    dry_run: bool,
    *,
    client: str | None,
    scope: str | None,
    config: Path | str | None,
    home: Path | None,
    cwd: Path | None,
    env: Mapping[str, str] | None,
    platform: str | None,
) -> list[FilePlan]:
    locations = select_locations(
        client=client, scope=scope, config=config, home=home, cwd=cwd, env=env, platform=platform
    )
    state = state_dir(env)
    # Planned and applied under one lock: a second run plans from what the first wrote.
    with contextlib.nullcontext() if dry_run else _state_lock(state):
        plans = plan(locations, client is not None or config is not None, state)
        if not dry_run:
            apply_plans(plans, state=state)
    return plans
