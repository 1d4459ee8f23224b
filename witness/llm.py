"""One client for every OpenAI-compatible chat server witness talks to.

The LLM drafter (:mod:`witness.annotate.llm_drafts`), the audit's LLM judge and eval's answer
extractor all call :class:`LLMClient`; there is no second client. It works with OpenAI, vLLM,
Ollama, LM Studio, llama.cpp's server or anything that speaks ``POST /v1/chat/completions``.

What it guarantees:

* **Retries** on HTTP 429, 408, 5xx, connection errors and timeouts, with exponential backoff and
  jitter: before retry ``k`` (``k = 1, 2, ...``) it waits ``u * min(backoff_max, backoff_base * 2**(k-1))``
  seconds, ``u ~ Uniform(0.5, 1)``; a ``Retry-After`` header (seconds) raises the wait to at least
  that value (capped at ``backoff_max``). Other 4xx answers are not retried. After
  ``max_retries`` retries the result carries ``error`` and ``text=None``: nothing is raised per
  request, so one bad request never loses a batch.
* **Bounded concurrency**: :meth:`LLMClient.chat_many` keeps at most ``concurrency`` requests in
  flight (``openai.AsyncOpenAI`` plus a semaphore) and returns results in input order.
* **An on-disk cache** (``cache_dir``): one JSON file per key, written atomically as each answer
  arrives, key = SHA-256 of the canonical JSON of ``{model, messages, response_format,
  temperature, max_tokens}``; images travel inside ``messages`` as data URLs, so the image bytes
  are part of the key. An interrupted run resumes from the cache and a re-run sends no request
  twice. Identical requests within one call are sent once. Only successful answers are cached.
* **Structured output where the server supports it**: a request with ``response_format`` that the
  server refuses with 400/422 is resent once without it (JSON is then read from the text by
  :func:`parse_json_reply`); when that plain request succeeds, the client stops sending
  ``response_format`` from then on. When it is refused too, the first refusal is reported and
  ``response_format`` stays on (the 400 had another cause).
* **The API key** is read from the environment variable ``api_key_env`` only, when the client is
  built; it is never logged, cached, written or put into an error message. A missing variable is
  fine for local servers (vLLM, Ollama) that ignore the key.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import os
import random
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import orjson

from .errors import InputError, require

__all__ = [
    "LLMConfig",
    "ChatResult",
    "LLMClient",
    "LLMUsage",
    "image_data_url",
    "parse_json_reply",
    "request_key",
    "backoff_delay",
    "estimate_cost",
]

_PLACEHOLDER_KEY = "not-set"  # sent when api_key_env is unset: local servers ignore the key


@dataclass(frozen=True)
class LLMConfig:
    """How to reach one model on one OpenAI-compatible server.

    ``base_url`` ends in ``/v1`` (``https://api.openai.com/v1``, ``http://localhost:8000/v1`` for
    vLLM, ``http://localhost:11434/v1`` for Ollama). ``timeout`` is seconds per attempt.
    ``price_prompt_per_1k`` / ``price_completion_per_1k`` are currency units per 1000 tokens, used
    only by :func:`estimate_cost` (default 0: local servers cost nothing).

    >>> LLMConfig("http://localhost:8000/v1", "qwen").concurrency
    8
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 5
    concurrency: int = 8
    cache_dir: Path | None = None
    temperature: float = 0.0
    max_tokens: int | None = None
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    price_prompt_per_1k: float = 0.0
    price_completion_per_1k: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not re.match(r"^https?://", self.base_url):
            raise InputError(
                f"Expected a base URL starting with http:// or https://, got {self.base_url!r} (LLMConfig.base_url). "
                "Pass e.g. http://localhost:8000/v1."
            )
        if not self.model:
            raise InputError(f"Expected a model name, got {self.model!r} (LLMConfig.model). Pass --model.")
        if self.concurrency < 1:
            raise InputError(f"Expected concurrency >= 1, got {self.concurrency} (LLMConfig.concurrency). Use 1 or more.")
        if self.max_retries < 0:
            raise InputError(f"Expected max_retries >= 0, got {self.max_retries} (LLMConfig.max_retries). Use 0 or more.")
        if not self.timeout > 0:
            raise InputError(f"Expected a positive timeout, got {self.timeout} (LLMConfig.timeout). Use seconds > 0.")
        if self.cache_dir is not None and not isinstance(self.cache_dir, Path):
            object.__setattr__(self, "cache_dir", Path(self.cache_dir))


@dataclass(frozen=True)
class ChatResult:
    """One chat completion: the reply text or an error (never both set), token usage, whether it
    came from the cache, and how many HTTP attempts it took (0 when cached).

    >>> ChatResult("hi", 3, 1, False, None).ok
    True
    """

    text: str | None
    prompt_tokens: int
    completion_tokens: int
    cached: bool
    error: str | None
    attempts: int = 1
    structured: bool = False  # True when the server honoured response_format

    @property
    def ok(self) -> bool:
        return self.error is None and self.text is not None


@dataclass(frozen=True)
class LLMUsage:
    """Totals over a list of :class:`ChatResult`: requests sent, cache hits, errors, retries and
    tokens (cached answers count their tokens in ``cached_*``, not in the billed totals).

    >>> u = LLMUsage.of([ChatResult("a", 10, 2, False, None), ChatResult("b", 10, 2, True, None, 0)])
    >>> u.requests, u.cached, u.prompt_tokens
    (1, 1, 10)
    """

    requests: int = 0
    cached: int = 0
    errors: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0

    @staticmethod
    def of(results: list[ChatResult]) -> "LLMUsage":
        req = cached = errors = retries = pt = ct = cpt = cct = 0
        for r in results:
            if r.cached:
                cached += 1
                cpt += r.prompt_tokens
                cct += r.completion_tokens
                continue
            req += 1
            retries += max(0, r.attempts - 1)
            errors += r.error is not None
            pt += r.prompt_tokens
            ct += r.completion_tokens
        return LLMUsage(req, cached, errors, retries, pt, ct, cpt, cct)


def estimate_cost(prompt_tokens: int, completion_tokens: int, *, price_prompt_per_1k: float = 0.0,
                  price_completion_per_1k: float = 0.0) -> float:
    """Estimated cost = prompt_tokens / 1000 * price_prompt + completion_tokens / 1000 * price_completion.

    >>> estimate_cost(2000, 500, price_prompt_per_1k=0.5, price_completion_per_1k=1.5)
    1.75
    """
    return prompt_tokens / 1000.0 * price_prompt_per_1k + completion_tokens / 1000.0 * price_completion_per_1k


def backoff_delay(retry: int, *, base: float = 0.5, cap: float = 30.0, retry_after: float | None = None,
                  rng: random.Random | None = None) -> float:
    """Seconds to wait before retry ``retry`` (1-based): ``u * min(cap, base * 2**(retry-1))`` with
    ``u ~ Uniform(0.5, 1)`` (jitter), raised to ``min(retry_after, cap)`` when the server sent
    ``Retry-After``.

    >>> 0.5 <= backoff_delay(1, base=1.0) <= 1.0
    True
    >>> backoff_delay(10, base=1.0, cap=4.0) <= 4.0
    True
    >>> backoff_delay(1, base=0.01, retry_after=2.0)
    2.0
    """
    u = (rng or random).uniform(0.5, 1.0)
    delay = u * min(cap, base * (2 ** max(0, retry - 1)))
    if retry_after is not None and retry_after > 0:
        delay = max(delay, min(retry_after, cap))
    return delay


def request_key(model: str, messages: list[dict], *, response_format: dict | None = None,
                temperature: float = 0.0, max_tokens: int | None = None) -> str:
    """The cache key of one request: SHA-256 (hex) of the canonical JSON (sorted keys) of
    ``{model, messages, response_format, temperature, max_tokens}``. Images are inside
    ``messages`` as data URLs, so a different image gives a different key.

    >>> k = request_key("m", [{"role": "user", "content": "hi"}])
    >>> len(k), k == request_key("m", [{"role": "user", "content": "hi"}]), k == request_key("n", [{"role": "user", "content": "hi"}])
    (64, True, False)
    """
    payload = {
        "model": model,
        "messages": messages,
        "response_format": response_format,
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    blob = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()


# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------

_MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}


def image_data_url(image: bytes | str | Path, *, max_side: int = 1024) -> str:
    """An image as a ``data:`` URL for a chat message, downscaled so that its longer side is at
    most ``max_side`` pixels (aspect ratio kept, Lanczos). An image already small enough in PNG,
    JPEG or WebP is passed through byte for byte; others are re-encoded (JPEG quality 90 without
    alpha, PNG with alpha). Encoding is deterministic, so the URL (and the cache key) is stable.
    A string that already is a ``data:`` or ``http(s)://`` URL is returned unchanged.

    Raises :class:`InputError` for a missing or unreadable image.

    >>> from PIL import Image
    >>> buf = io.BytesIO(); Image.new("RGB", (2000, 1000)).save(buf, "PNG")
    >>> url = image_data_url(buf.getvalue(), max_side=500)
    >>> url.startswith("data:image/jpeg;base64,")
    True
    >>> Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size
    (500, 250)
    """
    if max_side < 1:
        raise InputError(f"Expected max_side >= 1, got {max_side} (image_data_url). Use pixels, e.g. 1024.")
    where = "bytes"
    if isinstance(image, str) and re.match(r"^(data:|https?://)", image):
        return image
    if isinstance(image, (str, Path)):
        where = str(image)
        try:
            data = Path(image).read_bytes()
        except OSError as exc:
            raise InputError(f"Expected a readable image file, got {image!s} ({exc.strerror}). Check the scene's image path.") from None
    elif isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
    else:
        raise InputError(f"Expected image bytes or a path, got {type(image).__name__} (image_data_url). Pass bytes or a path.")
    from PIL import Image, UnidentifiedImageError

    try:
        img = Image.open(io.BytesIO(data))  # reads the header only
        w, h = img.size
        fmt = (img.format or "").upper()
        if max(w, h) <= max_side and fmt in ("PNG", "JPEG", "WEBP"):
            return f"data:{_MIME[fmt]};base64,{base64.b64encode(data).decode('ascii')}"
        img.load()
    except (UnidentifiedImageError, OSError) as exc:
        raise InputError(f"Expected an image, got data PIL cannot read ({where}): {exc}. Check the file.") from None
    if max(w, h) > max_side:
        scale = max_side / max(w, h)
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        img = img.resize(size, Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    if img.mode in ("RGBA", "LA", "P") and ("A" in img.mode or "transparency" in img.info):
        img.save(buf, "PNG", optimize=False)
        mime = "image/png"
    else:
        img.convert("RGB").save(buf, "JPEG", quality=90)
        mime = "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


# --------------------------------------------------------------------------------------------
# Tolerant JSON
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*(?:json5?|JSON)?[ \t]*\r?\n?(.*?)```", re.S)
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)


def _strip_trailing_commas(text: str) -> str:
    """Remove commas directly before ``}`` or ``]`` outside strings."""
    out: list[str] = []
    in_str = esc = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif c == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                i += 1
                continue
            out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _try_json(text: str) -> tuple[bool, Any]:
    for candidate in (text, _strip_trailing_commas(text)):
        try:
            return True, json.loads(candidate)
        except ValueError:
            pass
    return False, None


def _scan_json(text: str) -> tuple[bool, Any]:
    decoder = json.JSONDecoder()
    cleaned = _strip_trailing_commas(text)
    for src in (text, cleaned):
        for m in re.finditer(r"[\[{]", src):
            try:
                value, _ = decoder.raw_decode(src, m.start())
            except ValueError:
                continue
            return True, value
    return False, None


def parse_json_reply(text: str) -> Any:
    """Read the JSON value in an LLM reply, tolerating what models do around it.

    Rules, in order: drop ``<think>...</think>`` blocks; the whole text as JSON; the first
    fenced block (```` ```json ... ``` ````) as JSON; the first ``{`` or ``[`` from which a
    complete JSON value decodes (leading prose and trailing text are ignored). Each step also tries
    again with trailing commas removed (``[1, 2,]``). Raises :class:`InputError` when no step
    gives JSON.

    >>> parse_json_reply('Sure! Here it is:\\n```json\\n{"a": [1, 2,],}\\n```')
    {'a': [1, 2]}
    >>> parse_json_reply('The answer is {"ok": true} as asked.')
    {'ok': True}
    """
    if not isinstance(text, str):
        raise InputError(f"Expected reply text, got {type(text).__name__} (parse_json_reply). Pass the reply string.")
    body = _THINK.sub("", text).strip()
    if not body:
        raise InputError("Expected JSON in the reply, got empty text (parse_json_reply). Ask the model for JSON.")
    ok, value = _try_json(body)
    if ok:
        return value
    for m in _FENCE.finditer(body):
        ok, value = _try_json(m.group(1).strip())
        if ok:
            return value
    ok, value = _scan_json(body)
    if ok:
        return value
    snippet = body[:80].replace("\n", " ")
    raise InputError(f"Expected JSON in the reply, got {snippet!r}{'...' if len(body) > 80 else ''} (parse_json_reply). The model did not answer in JSON.")


# --------------------------------------------------------------------------------------------
# The client
# --------------------------------------------------------------------------------------------


def _status_of(exc: BaseException) -> int | None:
    return getattr(exc, "status_code", None)


def _retry_after(exc: BaseException) -> float | None:
    resp = getattr(exc, "response", None)
    headers = getattr(resp, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    status = _status_of(exc)
    name = type(exc).__name__
    if status is not None:
        msg = str(getattr(exc, "message", "") or exc)
        return f"HTTP {status} ({name}): {msg[:200]}"
    if "Timeout" in name:
        return f"timeout ({name})"
    return f"{name}: {str(exc)[:200]}"


def _retryable(exc: BaseException) -> bool:
    status = _status_of(exc)
    if status is not None:
        return status == 429 or status == 408 or status >= 500
    name = type(exc).__name__
    return "Timeout" in name or "Connection" in name


def _format_refused(exc: BaseException) -> bool:
    return _status_of(exc) in (400, 422)


class LLMClient:
    """A cached, retried, concurrency-bounded chat client for one model (see the module docstring).

    ``chat(messages, response_format=None)`` sends one request synchronously;
    ``chat_many([{"messages": [...], "response_format": {...}}, ...], progress=None)`` sends many
    with at most ``config.concurrency`` in flight and returns results in input order.
    ``progress``, when given, is called with the number of requests just finished (cache hits at
    once, then 1 per answer), e.g. ``lambda n: bar.advance(task, n)``.

    >>> client = LLMClient(LLMConfig("http://127.0.0.1:9/v1", "m", max_retries=0, timeout=0.5))
    >>> client.chat([{"role": "user", "content": "hi"}]).error.startswith("APIConnectionError")
    True
    """

    def __init__(self, config: LLMConfig, *, sleep: Callable[[float], None] | None = None):
        if not isinstance(config, LLMConfig):
            raise InputError(f"Expected an LLMConfig, got {type(config).__name__} (LLMClient). Build one with LLMConfig(base_url, model).")
        self.config = config
        self._api_key = os.environ.get(config.api_key_env) or _PLACEHOLDER_KEY
        self._response_format_ok = True
        self._lock = threading.Lock()
        self._rng = random.Random()
        self._sleep = sleep
        self._sync_client: Any = None
        self.sent = 0  # HTTP attempts made by this client (all calls)

    def _error(self, exc: BaseException) -> str:
        """The one-line error of a failed request, with a hint for refused keys, key scrubbed."""
        text = _describe(exc)
        if _status_of(exc) in (401, 403):
            state = "is not set" if self._api_key == _PLACEHOLDER_KEY else "was refused"
            text += f" The API key in ${self.config.api_key_env} {state}; export it or pass another --api-key-env."
        return self._scrub(text)

    def _scrub(self, text: str) -> str:
        """Remove the API key from a message (a server may echo it back in an error)."""
        key = self._api_key
        if key and key != _PLACEHOLDER_KEY and len(key) >= 4:
            text = text.replace(key, "***")
        return text

    def __repr__(self) -> str:  # never show the key
        return f"LLMClient(model={self.config.model!r}, base_url={self.config.base_url!r})"

    def preload(self) -> None:
        """Import the ``openai`` package now (about 1–2 s the first time), e.g. in a background
        thread while prompts are being built, so that the first request does not wait for it.
        Never raises: a missing ``openai`` is reported by the first request instead."""
        try:
            import openai.resources.chat.completions  # noqa: F401 - loaded lazily otherwise
        except ImportError:
            pass

    # -- cache ---------------------------------------------------------------------------------

    def key(self, messages: list[dict], response_format: dict | None = None) -> str:
        """The cache key of a request under this client's model, temperature and max_tokens."""
        c = self.config
        return request_key(c.model, messages, response_format=response_format, temperature=c.temperature, max_tokens=c.max_tokens)

    def _cache_path(self, key: str) -> Path | None:
        if self.config.cache_dir is None:
            return None
        return Path(self.config.cache_dir) / key[:2] / f"{key}.json"

    def cache_get(self, key: str) -> ChatResult | None:
        """The cached result of ``key`` (``cached=True``, ``attempts=0``), or None."""
        path = self._cache_path(key)
        if path is None or not path.exists():
            return None
        try:
            obj = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None  # a damaged entry is a miss; it is rewritten on the next answer
        return ChatResult(obj.get("text"), int(obj.get("prompt_tokens") or 0), int(obj.get("completion_tokens") or 0),
                          True, None, 0, bool(obj.get("structured")))

    def _cache_put(self, key: str, result: ChatResult) -> None:
        path = self._cache_path(key)
        if path is None or not result.ok:
            return
        from .io import atomic_path

        obj = {
            "model": self.config.model,
            "text": result.text,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
            "structured": result.structured,
            "created": time.time(),
        }
        with atomic_path(path, suffix=".json") as tmp:
            tmp.write_bytes(orjson.dumps(obj))

    # -- requests ------------------------------------------------------------------------------

    def _kwargs(self, messages: list[dict], response_format: dict | None) -> dict:
        kw: dict[str, Any] = {"model": self.config.model, "messages": messages, "temperature": self.config.temperature}
        if self.config.max_tokens is not None:
            kw["max_tokens"] = self.config.max_tokens
        if response_format is not None and self._response_format_ok:
            kw["response_format"] = response_format
        return kw

    @staticmethod
    def _result(resp: Any, attempts: int, structured: bool) -> ChatResult:
        """Read text and usage from a raw ``chat.completion`` HTTP response (JSON body)."""
        try:
            data = orjson.loads(resp.content)
            choices = data.get("choices") or []
            text = (choices[0].get("message") or {}).get("content") if choices else None
            usage = data.get("usage") or {}
            pt = int(usage.get("prompt_tokens") or 0)
            ct = int(usage.get("completion_tokens") or 0)
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError, IndexError):
            body = resp.content[:80]
            return ChatResult(None, 0, 0, False, f"malformed chat.completion response from the server: {body!r}", attempts, structured)
        if not isinstance(text, str):
            return ChatResult(None, pt, ct, False, "empty reply (no message content)", attempts, structured)
        return ChatResult(text, pt, ct, False, None, attempts, structured)

    @staticmethod
    def _post_args(kw: dict) -> dict:
        # ``post`` with a raw response skips the SDK's per-request model transforms and pydantic
        # parsing (about half the client CPU per request); errors map to the same exceptions
        return {"body": kw, "cast_to": _http().Response}

    def _client_kwargs(self) -> dict:
        return {"api_key": self._api_key, "base_url": self.config.base_url, "timeout": self.config.timeout, "max_retries": 0}

    def _wait(self, retry: int, exc: BaseException) -> float:
        c = self.config
        return backoff_delay(retry, base=c.backoff_base, cap=c.backoff_max, retry_after=_retry_after(exc), rng=self._rng)

    def _note_format_refused(self) -> None:
        with self._lock:
            self._response_format_ok = False

    def chat(self, messages: list[dict], *, response_format: dict | None = None) -> ChatResult:
        """Send one chat request (cached, retried); never raises for a failed request: the result
        carries ``error``."""
        _check_messages(messages, 0)
        key = self.key(messages, response_format)
        hit = self.cache_get(key)
        if hit is not None:
            return hit
        result = self._send_sync(self._sync(), messages, response_format)
        self._cache_put(key, result)
        return result

    def _sync(self) -> Any:
        """The synchronous ``openai.OpenAI`` client, built once and reused (it is thread-safe)."""
        with self._lock:
            if self._sync_client is None:
                openai = require("openai", "annotate")
                self._sync_client = openai.OpenAI(**self._client_kwargs())
            return self._sync_client

    def close(self) -> None:
        """Close the reused synchronous HTTP client (``chat_many`` closes its own)."""
        with self._lock:
            client, self._sync_client = self._sync_client, None
        if client is not None:
            client.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _attempt_done(self, resp: Any, kw: dict, attempts: int, dropped_format: bool) -> ChatResult:
        if dropped_format:  # the plain request worked where the structured one was refused
            self._note_format_refused()
        return self._result(resp, attempts, "response_format" in kw)

    def _send_sync(self, client: Any, messages: list[dict], response_format: dict | None) -> ChatResult:
        attempts = retry = 0
        use_format, first_error = True, None
        while True:
            kw = self._kwargs(messages, response_format if use_format else None)
            attempts += 1
            with self._lock:
                self.sent += 1
            try:
                resp = client.post("/chat/completions", **self._post_args(kw))
                return self._attempt_done(resp, kw, attempts, not use_format)
            except Exception as exc:  # openai errors; classified below
                error = exc
            if "response_format" in kw and _format_refused(error):
                use_format, first_error = False, error  # resend once without response_format
                continue
            if not use_format and first_error is not None and _format_refused(error):
                error = first_error  # refused either way: report the first refusal, keep the format
            if not _retryable(error) or retry >= self.config.max_retries:
                return ChatResult(None, 0, 0, False, self._error(error), attempts)
            retry += 1
            (self._sleep or time.sleep)(self._wait(retry, error))

    async def _send_async(self, client: Any, sem: asyncio.Semaphore, messages: list[dict],
                          response_format: dict | None) -> ChatResult:
        attempts = retry = 0
        use_format, first_error = True, None
        while True:
            kw = self._kwargs(messages, response_format if use_format else None)
            attempts += 1
            async with sem:
                with self._lock:
                    self.sent += 1
                try:
                    resp = await client.post("/chat/completions", **self._post_args(kw))
                    return self._attempt_done(resp, kw, attempts, not use_format)
                except Exception as exc:
                    error = exc
            if "response_format" in kw and _format_refused(error):
                use_format, first_error = False, error  # resend once without response_format
                continue
            if not use_format and first_error is not None and _format_refused(error):
                error = first_error
            if not _retryable(error) or retry >= self.config.max_retries:
                return ChatResult(None, 0, 0, False, self._error(error), attempts)
            retry += 1
            await asyncio.sleep(self._wait(retry, error))  # outside the semaphore: others proceed

    def chat_many(self, requests: list[dict], *, progress: Callable[[int], None] | None = None) -> list[ChatResult]:
        """Send many requests (each ``{"messages": [...], "response_format"?: {...}}``) with bounded
        concurrency; cached requests are not sent, identical requests are sent once, each answer is
        cached as it arrives. Results are in input order; failures carry ``error``."""
        keys: list[str] = []
        for i, req in enumerate(requests):
            if not isinstance(req, dict) or "messages" not in req:
                raise InputError(f"Expected a request dict with 'messages', got {type(req).__name__} (request {i}). "
                                 "Pass {'messages': [...], 'response_format': {...}}.")
            _check_messages(req["messages"], i)
            keys.append(self.key(req["messages"], req.get("response_format")))
        results: list[ChatResult | None] = [None] * len(requests)
        todo: dict[str, list[int]] = {}
        hits = 0
        for i, k in enumerate(keys):
            if k in todo:
                todo[k].append(i)
                continue
            hit = self.cache_get(k)
            if hit is not None:
                results[i] = hit
                hits += 1
            else:
                todo[k] = [i]
        # duplicates of a cache hit
        for i, k in enumerate(keys):
            if results[i] is None and k not in todo:
                results[i] = self.cache_get(k)
                hits += 1
        if progress is not None and hits:
            progress(hits)
        if todo:
            _run(self._many(requests, todo, results, progress))
        return [r for r in results]  # type: ignore[misc]

    async def _many(self, requests: list[dict], todo: dict[str, list[int]], results: list, progress: Callable | None) -> None:
        openai = require("openai", "annotate")
        limits = _http().Limits(max_connections=self.config.concurrency + 4, max_keepalive_connections=self.config.concurrency + 4)
        kwargs = self._client_kwargs()
        try:
            http_client = openai.DefaultAsyncHttpxClient(limits=limits, timeout=self.config.timeout)
            kwargs["http_client"] = http_client
        except (AttributeError, TypeError):  # pragma: no cover - older/newer openai without it
            pass
        client = openai.AsyncOpenAI(**kwargs)
        sem = asyncio.Semaphore(self.config.concurrency)

        async def one(key: str, idx: list[int]) -> None:
            req = requests[idx[0]]
            res = await self._send_async(client, sem, req["messages"], req.get("response_format"))
            if self.config.cache_dir is not None and res.ok:
                self._cache_put(key, res)  # small atomic write, as each answer arrives
            for n, i in enumerate(idx):
                # a repeat of one request in the same call is answered by it: counted as cached
                results[i] = res if n == 0 else ChatResult(res.text, res.prompt_tokens, res.completion_tokens, res.ok, res.error, 0, res.structured)
            if progress is not None:
                progress(len(idx))

        try:
            await asyncio.gather(*(one(k, idx) for k, idx in todo.items()))
        finally:
            await client.close()


def _http() -> Any:
    """The HTTP package the installed ``openai`` is built on: ``httpx2`` (openai 3.x) or ``httpx``."""
    try:
        import httpx2

        return httpx2
    except ImportError:
        import httpx

        return httpx


def _check_messages(messages: Any, i: int) -> None:
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise InputError(f"Expected messages as a non-empty list of {{'role', 'content'}} dicts, got {str(messages)[:80]!r} "
                         f"(request {i}). Build OpenAI chat messages.")


def _run(coro: Any) -> Any:
    """Run a coroutine from sync code, also when an event loop is already running (notebooks)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")
