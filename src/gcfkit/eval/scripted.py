"""A scripted model server on loopback, for testing the harness: it speaks the OpenAI
chat-completions protocol (``POST .../chat/completions``) and the Anthropic Messages
protocol (``POST .../v1/messages``), and answers as its script says.

It is no model. A "correct" answer is computed by :mod:`gcfkit.eval.oracle` (gcfkit's own
decoders reading the prompt), a "wrong" one is that answer altered. So a run against it
checks the harness (prompts, transport, retries, storage, scoring, report), never a model.

A script is a comma-separated list of behaviours for the 1st, 2nd, ... attempt at the same
prompt (the last one repeats): ``correct``, ``wrong``, ``malformed`` (a 200 whose body is
not JSON), ``badshape`` (JSON without the answer), ``empty`` (an empty answer), ``slow``
(answers correctly after ``--slow`` seconds), ``429`` (with ``Retry-After``), ``500``,
``503``, ``529`` (Anthropic's "overloaded"), ``400``. ``mixed`` (or ``mixed:SEED``) picks,
per question, mostly correct answers with some wrong ones and some transient failures; the
pick depends on the question and its data, not on the format it is shown in, so every format
scores the same and no difference between formats comes from the script.

Run it::

    python -m gcfkit.eval.scripted --port 8765 --script mixed

>>> Script.parse("429,correct").behaviour("k", 1), Script.parse("429,correct").behaviour("k", 5)
('429', 'correct')
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import random
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from .oracle import answer as oracle_answer
from .prompts import extract_data, question_line
from .questions import parse_question
from .report import SCRIPTED_MODEL

__all__ = ["BEHAVIOURS", "Script", "ScriptedServer", "main", "serve", "wrong_answer"]

BEHAVIOURS: Final = (
    "correct",
    "wrong",
    "malformed",
    "badshape",
    "empty",
    "slow",
    "429",
    "500",
    "503",
    "529",
    "400",
)
_MIXED: Final = (
    (0.70, ("correct",)),
    (0.85, ("wrong",)),
    (0.90, ("429", "correct")),
    (0.95, ("500", "correct")),
    (1.00, ("malformed", "correct")),
)


@dataclass(frozen=True)
class Script:
    """Behaviours per attempt (``steps``), or a seeded mix per prompt (``mixed``)."""

    steps: tuple[str, ...] = ("correct",)
    mixed: int | None = None

    @classmethod
    def parse(cls, text: str) -> Script:
        text = text.strip()
        if text.startswith("mixed"):
            _, _, seed = text.partition(":")
            return cls(mixed=int(seed) if seed else 0)
        steps = tuple(s.strip() for s in text.split(",") if s.strip())
        bad = [s for s in steps if s not in BEHAVIOURS]
        if not steps or bad:
            raise ValueError(
                f"bad script {text!r}: behaviours are {', '.join(BEHAVIOURS)} or mixed"
            )
        return cls(steps)

    def behaviour(self, key: str, attempt: int) -> str:
        steps = self.steps
        if self.mixed is not None:
            r = random.Random(f"{self.mixed}:{key}").random()
            steps = next(s for p, s in _MIXED if r < p)
        return steps[min(attempt, len(steps)) - 1]


def wrong_answer(user: str, correct: str) -> str:
    """An answer that scores wrong for the prompt's question (the correct one, altered)."""
    try:
        op = parse_question(question_line(user)).op
    except ValueError:
        op = "lookup"
    if op == "generate":
        lines = correct.rstrip("\n").split("\n")
        return "\n".join(lines[:-1]) + "\n" if len(lines) > 1 else "not a payload"
    if op == "presence":
        return {"absent": "null", "null": "value"}.get(correct, "absent")
    try:
        v = json.loads(correct)
    except ValueError:
        return f"{correct} (wrong)"
    if isinstance(v, bool):
        return json.dumps(not v)
    if isinstance(v, (int, float)):
        return json.dumps(v + 1)
    return f"{correct} (wrong)"


@dataclass
class _State:
    script: Script
    slow: float
    retry_after: str
    require_key: str | None
    attempts: dict[str, int] = field(default_factory=dict)
    log: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    server_version = "gcfkit-scripted/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def state(self) -> _State:
        return self.server.state  # type: ignore[attr-defined, no-any-return]

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client gave up
            self.wfile.write(body)

    def _json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(value, ensure_ascii=False).encode("utf-8"), headers)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        path = self.path.split("?", 1)[0]
        if path.endswith("/chat/completions"):
            protocol = "openai"
        elif path.endswith("/v1/messages"):
            protocol = "anthropic"
        else:
            self._json(404, {"error": {"message": f"no route {path}"}})
            return
        st = self.state
        key = (
            self.headers.get("authorization", "").removeprefix("Bearer ")
            if protocol == "openai"
            else self.headers.get("x-api-key", "")
        )
        if st.require_key is not None and key != st.require_key:
            self._json(401, {"error": {"type": "authentication_error", "message": "bad key"}})
            return
        system, user = _prompt(protocol, body)
        prompt_key = hashlib.sha256(f"{system}\0{user}".encode()).hexdigest()
        with st.lock:
            attempt = st.attempts[prompt_key] = st.attempts.get(prompt_key, 0) + 1
            behaviour = st.script.behaviour(_question_key(user), attempt)
            st.log.append(
                {
                    "protocol": protocol,
                    "path": path,
                    "attempt": attempt,
                    "behaviour": behaviour,
                    "time": time.monotonic(),
                    "body": {k: v for k, v in body.items() if k not in ("messages", "system")},
                    "key": key,
                }
            )
        self._behave(protocol, behaviour, body, user)

    def _behave(self, protocol: str, behaviour: str, body: dict[str, Any], user: str) -> None:
        st = self.state
        if behaviour in ("429", "500", "503", "529", "400"):
            status = int(behaviour)
            headers = {"retry-after": st.retry_after} if status in (429, 503, 529) else {}
            kind = {429: "rate_limit_error", 529: "overloaded_error", 400: "invalid_request_error"}
            err = {"type": kind.get(status, "api_error"), "message": f"scripted {status}"}
            self._json(status, {"error": err}, headers)
            return
        if behaviour == "malformed":
            self._send(200, b"<html>upstream proxy error</html>")
            return
        if behaviour == "badshape":
            self._json(200, {"id": "x", "object": "chat.completion", "choices": []})
            return
        if behaviour == "slow":
            st.stop.wait(st.slow)
        try:
            correct = oracle_answer(user)
        except ValueError as e:
            correct = f"I cannot read this ({e})"[:200]
        text = "" if behaviour == "empty" else correct
        if behaviour == "wrong":
            text = wrong_answer(user, correct)
        model = f"{SCRIPTED_MODEL}/{body.get('model', '')}"
        if protocol == "openai":
            self._json(
                200,
                {
                    "id": "scripted",
                    "object": "chat.completion",
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                },
            )
        else:
            self._json(
                200,
                {
                    "id": "scripted",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                },
            )


def _question_key(user: str) -> str:
    """What a mixed script draws on: the question (and a generation's data), the same in
    every format."""
    question = question_line(user)
    if question.startswith("Write the data in <data> as "):
        question = "generate"
    return hashlib.sha256(f"{question}\0{extract_data(user) or ''}".encode()).hexdigest()


def _prompt(protocol: str, body: dict[str, Any]) -> tuple[str, str]:
    system = ""
    user = ""
    if protocol == "anthropic":
        system = body.get("system") or ""
    for m in body.get("messages") or ():
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if m.get("role") == "system" and isinstance(content, str):
            system = content
        elif m.get("role") == "user" and isinstance(content, str):
            user = content
    return str(system), user


class ScriptedServer:
    """The server in a background thread (a context manager; ``url`` is the API base).

    ``log`` lists every request it saw (behaviour, attempt, sampling parameters, key).
    """

    def __init__(
        self,
        script: Script | str = "correct",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        slow: float = 5.0,
        retry_after: str = "1",
        require_key: str | None = None,
    ) -> None:
        if isinstance(script, str):
            script = Script.parse(script)
        self._httpd = ThreadingHTTPServer((host, port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self.state = _State(script, slow, retry_after, require_key)
        self._httpd.state = self.state  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def log(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return list(self.state.log)

    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.state.stop.set()  # wake slow handlers
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def serve(script: Script | str = "correct", **kw: Any) -> Iterator[ScriptedServer]:
    """``with serve("429,correct") as srv:`` a started :class:`ScriptedServer`."""
    srv = ScriptedServer(script, **kw).start()
    try:
        yield srv
    finally:
        srv.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gcfkit.eval.scripted``: serve until interrupted (SIGINT or SIGTERM)."""
    p = argparse.ArgumentParser(
        prog="python -m gcfkit.eval.scripted",
        description="A scripted chat-completions / Messages server on loopback for testing "
        "gcfkit eval. It is not a model: its answers come from gcfkit's own decoders.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    p.add_argument("--port", type=int, default=8765, help="port (0: any free port)")
    p.add_argument("--script", default="correct", help="behaviours per attempt, or mixed[:SEED]")
    p.add_argument("--slow", type=float, default=5.0, help="seconds a 'slow' answer takes")
    p.add_argument("--retry-after", default="1", help="Retry-After value of 429/503/529")
    p.add_argument("--require-key", help="answer 401 unless this key is sent")
    args = p.parse_args(argv)
    try:
        srv = ScriptedServer(
            args.script,
            host=args.host,
            port=args.port,
            slow=args.slow,
            retry_after=args.retry_after,
            require_key=args.require_key,
        )
    except (ValueError, OSError) as e:
        print(f"gcfkit.eval.scripted: {e}", file=sys.stderr)
        return 2
    done = threading.Event()

    def stop(*_: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    srv.start()
    print(f"scripted model server on {srv.url} (script: {args.script})", flush=True)
    try:
        done.wait()
    finally:
        srv.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
