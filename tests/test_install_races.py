"""install-mcp against a world that does not hold still: a config an editor rewrites while
gcfkit edits it, two gcfkit runs at once, and server names that look like options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gcfkit.cli import build_parser
from gcfkit.clients import install as install_module
from gcfkit.clients.install import RECORDS_FILENAME, install_mcp, uninstall_mcp
from gcfkit.errors import ConfigError

LAUNCHER = ["/opt/gcfkit/bin/gcfkit"]
ROOT = Path(__file__).resolve().parent.parent


def config_with(path: Path, servers: dict[str, Any], **extra: Any) -> bytes:
    path.write_text(json.dumps({**extra, "mcpServers": servers}, indent=2) + "\n")
    return path.read_bytes()


def test_a_name_that_looks_like_an_option_is_written_so_the_proxy_accepts_it(
    tmp_path: Path,
) -> None:
    cfg = tmp_path / "mcp.json"
    config_with(cfg, {"-git": {"command": "uvx", "args": ["mcp-server-git"]}})
    install_mcp("-git", config=cfg, launcher=LAUNCHER, env={"GCFKIT_STATE_DIR": str(tmp_path)})
    args = json.loads(cfg.read_text())["mcpServers"]["-git"]["args"]
    assert args[:2] == ["proxy", "--name=-git"]
    # What the client will run must parse: before, argparse refused "--name -git".
    parsed = build_parser().parse_args(args)
    assert parsed.name == "-git" and parsed.command[-2:] == ["uvx", "mcp-server-git"]
    uninstall_mcp("-git", config=cfg, env={"GCFKIT_STATE_DIR": str(tmp_path)})
    assert json.loads(cfg.read_text())["mcpServers"]["-git"]["args"] == ["mcp-server-git"]


def _edit_during(monkeypatch: pytest.MonkeyPatch, name: str, cfg: Path, edit: bytes) -> None:
    """Make the user's edit land inside gcfkit's write, right after ``install.<name>``."""
    real = getattr(os, name)
    done: list[bool] = []

    def hooked(*args: Any, **kwargs: Any) -> Any:
        # fsync: of the temp file (the first one); chmod: of the temp file, not a backup's.
        target = str(args[0])
        if not done and (name == "fsync" or target.endswith(".tmp")):
            done.append(True)
            cfg.write_bytes(edit)
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, hooked)


@pytest.mark.parametrize("moment", ["fsync", "chmod"])
def test_an_edit_made_while_gcfkit_writes_is_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moment: str
) -> None:
    cfg = tmp_path / "mcp.json"
    config_with(cfg, {"time": {"command": "uvx", "args": ["mcp-server-time"]}})
    edit = config_with(
        tmp_path / "edited.json",
        {"time": {"command": "uvx", "args": ["mcp-server-time"]}},
        theme="the user's edit",
    )
    # The edit lands between gcfkit's check and its rename: after the temp file is written
    # (fsync) or just before the rename (chmod). Before, the check ran first, then the
    # rename replaced the user's edit.
    _edit_during(monkeypatch, moment, cfg, edit)
    with pytest.raises(ConfigError, match="changed while gcfkit was editing"):
        install_mcp("time", config=cfg, launcher=LAUNCHER, env={"GCFKIT_STATE_DIR": str(tmp_path)})
    assert cfg.read_bytes() == edit
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_an_edit_landing_at_the_swap_itself_is_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not install_module._exchange(tmp_path / "a", tmp_path / "b") and not sys.platform.startswith(
        "linux"
    ):
        pytest.skip("no atomic exchange here: covered by the re-check before the rename")
    cfg = tmp_path / "mcp.json"
    config_with(cfg, {"time": {"command": "uvx", "args": []}})
    edit = config_with(tmp_path / "edited.json", {"time": {"command": "uvx", "args": []}}, x=1)
    real = install_module._exchange
    calls: list[int] = []

    def late_edit(a: Any, b: Any) -> bool:
        if not calls:
            cfg.write_bytes(edit)  # the very last moment before the swap
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(install_module, "_exchange", late_edit)
    with pytest.raises(ConfigError, match="changed while gcfkit was editing"):
        install_mcp("time", config=cfg, launcher=LAUNCHER, env={"GCFKIT_STATE_DIR": str(tmp_path)})
    assert cfg.read_bytes() == edit


_EDITOR = r"""
import json, os, sys, time
path, last, stop = sys.argv[1], sys.argv[2], sys.argv[3]
n = 0
while not os.path.exists(stop):
    n += 1
    data = json.loads(open(path, "rb").read())  # read, modify, write: as clients do
    data["counter"] = n
    for name, target in ((path, path + ".editor"), (last, last + ".editor")):
        with open(target, "w") as f:
            f.write(json.dumps(data, indent=2) + "\n" if name == path else str(n))
        os.replace(target, name)
    time.sleep(0.002)
print(n)
"""


def test_an_editor_rewriting_the_config_every_few_ms_loses_nothing(tmp_path: Path) -> None:
    """A real concurrent writer (a process rewriting the config every ~2 ms, read-modify-
    write with a counter). Each install/uninstall either wins or stops with "changed"; when
    it returns, the config must hold at least the editor's last completed write: a rename
    that replaced a newer edit with gcfkit's older-based version would show a lower counter.
    """
    cfg = tmp_path / "mcp.json"
    last = tmp_path / "last"
    config_with(cfg, {"time": {"command": "uvx", "args": ["mcp-server-time"]}})
    last.write_text("0")
    stop = tmp_path / "stop"
    editor = subprocess.Popen(
        [sys.executable, "-c", _EDITOR, str(cfg), str(last), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    env = {"GCFKIT_STATE_DIR": str(tmp_path / "state")}
    outcomes = {"ok": 0, "changed": 0, "lost": 0}
    try:
        while last.read_text() == "0":  # the editor is running
            time.sleep(0.001)
        deadline = time.monotonic() + 20
        runs = 0
        while runs < 60 and time.monotonic() < deadline:
            runs += 1
            try:
                if runs % 2:
                    install_mcp("time", config=cfg, launcher=LAUNCHER, env=env)
                else:
                    uninstall_mcp("time", config=cfg, env=env)
                outcomes["ok"] += 1
            except ConfigError as e:
                # changed under us (the check) or caught mid-write by the planner's parse
                assert e.code in ("io_error", "malformed_config"), e
                outcomes["changed"] += 1
            done = int(last.read_text())
            if json.loads(cfg.read_bytes()).get("counter", 0) < done:
                outcomes["lost"] += 1
    finally:
        stop.touch()
        out, _ = editor.communicate(timeout=30)
    assert int(out) > 0
    assert outcomes["lost"] == 0, outcomes


def test_two_installs_at_once_keep_both_sidecar_records(tmp_path: Path) -> None:
    cfg = tmp_path / "mcp.json"
    names = [f"s{i}" for i in range(6)]
    config_with(cfg, {n: {"command": "srv", "args": [n]} for n in names})
    env = {"GCFKIT_STATE_DIR": str(tmp_path / "state")}
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(names))

    def one(name: str) -> None:
        try:
            barrier.wait(timeout=10)
            for _ in range(50):  # planned and applied under the lock: never "changed"
                try:
                    install_mcp(name, config=cfg, launcher=LAUNCHER, env=env)
                    return
                except ConfigError as e:
                    if "changed while" not in str(e):
                        raise
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    sidecar = json.loads((tmp_path / "state" / RECORDS_FILENAME).read_text())
    assert sorted(item["name"] for item in sidecar["servers"]) == names
    wrapped = json.loads(cfg.read_text())["mcpServers"]
    assert all(wrapped[n]["command"] == LAUNCHER[0] for n in names)


def test_two_install_processes_at_once_keep_both_sidecar_records(tmp_path: Path) -> None:
    cfg = tmp_path / "mcp.json"
    names = [f"p{i}" for i in range(4)]
    config_with(cfg, {n: {"command": "srv", "args": [n]} for n in names})
    environment = {
        **os.environ,
        "GCFKIT_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT / "src"),
    }
    command = [sys.executable, "-m", "gcfkit.cli", "install-mcp", "--config", str(cfg)]
    procs = [
        subprocess.Popen(
            [*command, n, "--gcfkit", LAUNCHER[0]],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for n in names
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    sidecar = json.loads((tmp_path / "state" / RECORDS_FILENAME).read_text())
    assert sorted(item["name"] for item in sidecar["servers"]) == names
