"""Pluggable models: an OpenAI-compatible chat-completions endpoint, the Anthropic Messages
API, or any command that reads the prompt on stdin and writes its answer on stdout.

Specs (``gcfkit eval --model``):

* ``openai-compatible:URL:MODEL``: ``URL`` is the API base (``http://127.0.0.1:8000/v1``;
  ``/chat/completions`` is appended unless it is there); covers vLLM, llama.cpp's server,
  Ollama and hosted APIs. The key, if any, comes from ``$OPENAI_API_KEY`` (or the
  variable ``--api-key-env`` names) and is sent as a bearer token.
* ``anthropic:MODEL`` or ``anthropic:URL:MODEL``: the Messages API; key from
  ``$ANTHROPIC_API_KEY`` (required for the default endpoint).
* ``command:CMD ARGS...``: runs the command once per prompt (split like a shell would),
  prompt text on stdin; ``GCFKIT_EVAL_TEMPERATURE``, ``GCFKIT_EVAL_SEED`` and
  ``GCFKIT_EVAL_MAX_TOKENS`` in its environment. A non-zero exit or a timeout is an error
  (the process group is killed on timeout).

Every failure is a :class:`ModelError` that says whether a retry may help and how long the
server asked to wait (``Retry-After``); :mod:`gcfkit.eval.runner` does the retrying.

>>> m = parse_model("openai-compatible:http://127.0.0.1:8765/v1:llama3:8b")
>>> m.url, m.model
('http://127.0.0.1:8765/v1/chat/completions', 'llama3:8b')
>>> parse_model("command:python3 answer.py").argv
['python3', 'answer.py']
>>> parse_retry_after("2")
2.0
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import os
import re
import shlex
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import ConfigError
from .prompts import Prompt

__all__ = [
    "AnthropicModel",
    "CommandModel",
    "Completion",
    "Model",
    "ModelError",
    "OpenAIChatModel",
    "Params",
    "parse_model",
    "parse_retry_after",
]

ANTHROPIC_URL: Final = "https://api.anthropic.com"
ANTHROPIC_VERSION: Final = "2023-06-01"
_RETRYABLE_STATUS: Final = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_EXCERPT: Final = 300


@dataclass(frozen=True)
class Params:
    """Sampling and transport parameters of every call of a run (all recorded).

    ``temperature`` and ``seed`` None: not sent (the endpoint's default applies).
    """

    temperature: float | None = 0.0
    seed: int | None = 0
    max_tokens: int = 1024
    timeout: float = 120.0


@dataclass(frozen=True)
class Completion:
    """One answer: its text, what the endpoint reported about it, and the seconds taken."""

    text: str
    model: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    latency: float = 0.0
    sent: dict[str, Any] = field(default_factory=dict)


class ModelError(Exception):
    """A call that gave no answer. ``kind``: ``rate_limited``, ``server_error``,
    ``timeout``, ``connection``, ``malformed``, ``http`` (a refusal such as 400/401) or
    ``command``; ``retryable`` says whether trying again may help; ``retry_after`` is the
    wait the server asked for, in seconds."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "status": self.status,
            "retry_after": self.retry_after,
        }


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delay-seconds or an HTTP date), or
    None when there is none or it cannot be read.

    >>> parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0)
    10.0
    >>> parse_retry_after("soon") is None
    True
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds or seconds < 0:  # NaN, or a date in the past
        return 0.0
    return seconds


def _retry_after(headers: Mapping[str, str]) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    return parse_retry_after(headers.get("retry-after"))


class Model(ABC):
    """A model the harness can ask. ``spec`` is how the run records it (never a key)."""

    spec: str

    @abstractmethod
    async def complete(self, prompt: Prompt, params: Params) -> Completion:
        """Ask ``prompt``; raise :class:`ModelError` on any failure."""

    async def aclose(self) -> None:  # noqa: B027 - most models hold nothing to release
        """Release connections (idempotent)."""


# ---------------------------------------------------------------------------------------
# HTTP models
# ---------------------------------------------------------------------------------------


def _httpx() -> Any:
    try:
        import httpx2
    except ImportError:
        raise ConfigError(
            "invalid_option",
            "HTTP models need the eval extra: pip install 'gcfkit[eval]' (httpx2)",
        ) from None
    return httpx2


class _HTTPModel(Model):
    url: str

    def __init__(self, headers: dict[str, str]) -> None:
        self._headers = headers
        self._client: Any = None

    def _session(self) -> Any:
        if self._client is None:
            httpx = _httpx()
            self._client = httpx.AsyncClient(headers=self._headers, follow_redirects=False)
        return self._client

    async def _post(self, body: dict[str, Any], timeout: float) -> tuple[Any, float]:
        httpx = _httpx()
        started = time.monotonic()
        try:
            r = await self._session().post(self.url, json=body, timeout=timeout)
        except httpx.TimeoutException as e:
            raise ModelError(
                "timeout", f"no answer within {timeout:g} s ({type(e).__name__})", retryable=True
            ) from None
        except httpx.TransportError as e:
            raise ModelError("connection", f"{type(e).__name__}: {e}", retryable=True) from None
        latency = time.monotonic() - started
        if r.status_code != 200:
            status = r.status_code
            kind = "rate_limited" if status == 429 else "server_error" if status >= 500 else "http"
            raise ModelError(
                kind,
                f"HTTP {status}: {r.text[:_EXCERPT]}",
                retryable=status in _RETRYABLE_STATUS,
                status=status,
                retry_after=_retry_after(r.headers),
            )
        try:
            return json.loads(r.content), latency
        except (ValueError, UnicodeDecodeError):
            raise ModelError(
                "malformed", f"the body is not JSON: {r.text[:_EXCERPT]!r}", retryable=True
            ) from None

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


def _malformed(what: str, body: Any) -> ModelError:
    text = json.dumps(body, ensure_ascii=False)[:_EXCERPT]
    return ModelError("malformed", f"{what}: {text}", retryable=True)


class OpenAIChatModel(_HTTPModel):
    """An OpenAI-compatible ``/chat/completions`` endpoint."""

    def __init__(self, base: str, model: str, *, api_key: str | None = None) -> None:
        base = base.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else f"{base}/chat/completions"
        self.model = model
        self.spec = f"openai-compatible:{base}:{model}"
        headers = {"content-type": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        super().__init__(headers)

    async def complete(self, prompt: Prompt, params: Params) -> Completion:
        messages = []
        if prompt.system:
            messages.append({"role": "system", "content": prompt.system})
        messages.append({"role": "user", "content": prompt.user})
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": params.max_tokens,
        }
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.seed is not None:
            body["seed"] = params.seed
        data, latency = await self._post(body, params.timeout)
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            raise _malformed("no choices[0].message.content", data) from None
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise _malformed("message content is not text", data)
        sent: dict[str, Any] = {
            k: body[k] for k in ("temperature", "seed", "max_tokens") if k in body
        }
        return Completion(
            content,
            str(data.get("model") or self.model),
            choice.get("finish_reason"),
            data.get("usage") if isinstance(data.get("usage"), dict) else {},
            latency,
            sent,
        )


class AnthropicModel(_HTTPModel):
    """The Anthropic Messages API (``/v1/messages``); it takes no seed (recorded as unsent)."""

    def __init__(self, base: str, model: str, *, api_key: str | None = None) -> None:
        base = base.rstrip("/")
        self.url = base if base.endswith("/v1/messages") else f"{base}/v1/messages"
        self.model = model
        self.spec = f"anthropic:{base}:{model}"
        headers = {"content-type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        super().__init__(headers)

    async def complete(self, prompt: Prompt, params: Params) -> Completion:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_tokens,
            "messages": [{"role": "user", "content": prompt.user}],
        }
        if prompt.system:
            body["system"] = prompt.system
        if params.temperature is not None:
            body["temperature"] = params.temperature
        data, latency = await self._post(body, params.timeout)
        blocks = data.get("content") if isinstance(data, dict) else None
        if not isinstance(blocks, list):
            raise _malformed("no content blocks", data)
        texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        if not texts or not all(isinstance(t, str) for t in texts):
            raise _malformed("no text block", data)
        sent: dict[str, Any] = {k: body[k] for k in ("temperature", "max_tokens") if k in body}
        return Completion(
            "".join(t for t in texts if isinstance(t, str)),
            str(data.get("model") or self.model),
            data.get("stop_reason"),
            data.get("usage") if isinstance(data.get("usage"), dict) else {},
            latency,
            sent,
        )


# ---------------------------------------------------------------------------------------
# Command model
# ---------------------------------------------------------------------------------------


class CommandModel(Model):
    """Any command: the prompt on stdin, the answer on stdout (UTF-8)."""

    def __init__(self, argv: list[str]) -> None:
        if not argv:
            raise ConfigError("invalid_option", "command: needs a command to run")
        self.argv = argv
        self.spec = "command:" + shlex.join(argv)

    async def complete(self, prompt: Prompt, params: Params) -> Completion:
        env = dict(os.environ)
        sent: dict[str, Any] = {"max_tokens": params.max_tokens}
        env["GCFKIT_EVAL_MAX_TOKENS"] = str(params.max_tokens)
        if params.temperature is not None:
            env["GCFKIT_EVAL_TEMPERATURE"] = repr(params.temperature)
            sent["temperature"] = params.temperature
        if params.seed is not None:
            env["GCFKIT_EVAL_SEED"] = str(params.seed)
            sent["seed"] = params.seed
        started = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,  # its own group, so a timeout takes its children too
            )
        except OSError as e:
            raise ModelError(
                "command", f"cannot run {self.argv[0]}: {e}", retryable=False
            ) from None
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(prompt.text.encode("utf-8")), params.timeout
            )
        except (asyncio.TimeoutError, asyncio.CancelledError) as e:
            _kill_group(proc)
            await proc.wait()
            if isinstance(e, asyncio.CancelledError):
                raise
            raise ModelError(
                "timeout", f"no answer within {params.timeout:g} s", retryable=True
            ) from None
        latency = time.monotonic() - started
        if proc.returncode != 0:
            raise ModelError(
                "command",
                f"exit status {proc.returncode}: {err.decode('utf-8', 'replace')[-_EXCERPT:]}",
                retryable=True,
            )
        try:
            text = out.decode("utf-8")
        except UnicodeDecodeError:
            raise ModelError("malformed", "the answer is not UTF-8", retryable=True) from None
        return Completion(text, self.spec, "exit", {}, latency, sent)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------------
# Specs
# ---------------------------------------------------------------------------------------

# scheme://host[:port][/path without colons] : model (the model may contain colons)
_URL_MODEL: Final = re.compile(r"(https?://(?:\[[^\]]+\]|[^/:\s]+)(?::\d+)?(?:/[^:\s]*)?):(.+)\Z")


def _key(env_name: str | None, default: str) -> str | None:
    return os.environ.get(env_name or default) or None


def parse_model(spec: str, *, api_key_env: str | None = None) -> Model:
    """The model a ``--model`` spec names (see the module docstring)."""
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise ConfigError("invalid_option", f"bad model spec {spec!r}: see gcfkit eval --help")
    if kind in ("openai-compatible", "openai"):
        m = _URL_MODEL.match(rest)
        if m is None:
            raise ConfigError(
                "invalid_option",
                f"bad model spec {spec!r}: openai-compatible:URL:MODEL, e.g. "
                "openai-compatible:http://127.0.0.1:8000/v1:my-model",
            )
        return OpenAIChatModel(m.group(1), m.group(2), api_key=_key(api_key_env, "OPENAI_API_KEY"))
    if kind == "anthropic":
        m = _URL_MODEL.match(rest)
        base, model = (m.group(1), m.group(2)) if m else (ANTHROPIC_URL, rest)
        key = _key(api_key_env, "ANTHROPIC_API_KEY")
        if key is None and base == ANTHROPIC_URL:
            raise ConfigError(
                "invalid_option", "anthropic: needs a key in $ANTHROPIC_API_KEY (or --api-key-env)"
            )
        return AnthropicModel(base, model, api_key=key)
    if kind == "command":
        try:
            argv = shlex.split(rest)
        except ValueError as e:
            raise ConfigError("invalid_option", f"bad command in {spec!r}: {e}") from None
        return CommandModel(argv)
    raise ConfigError(
        "invalid_option",
        f"unknown model kind {kind!r}: openai-compatible:URL:MODEL, anthropic:MODEL, "
        "anthropic:URL:MODEL or command:CMD",
    )
