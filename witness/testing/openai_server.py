"""A small, real OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks.

``OpenAIServer(handler)`` is a context manager; ``handler(request_json) -> reply`` is called for
every ``POST /v1/chat/completions`` (from a server thread; several at once under concurrency), and
the reply may be:

* a ``str``: the assistant's text, wrapped by :func:`completion` (usage counted from the text);
* a ``dict``: sent as the JSON body with status 200 (use :func:`completion` to build one);
* a tuple ``(status, body)`` or ``(status, body, headers)``: that HTTP status with ``body``
  (a dict is sent as JSON, a str as text), e.g. ``(429, {"error": {...}}, {"retry-after": "0"})``;
* :class:`Delay` ``(seconds, reply)``: wait, then send ``reply`` (slower than the client's timeout
  to test timeouts).

``server.requests`` holds every received JSON body in arrival order (``server.headers`` the
matching request headers, names lowercased), ``server.base_url`` is ``http://127.0.0.1:PORT/v1``. ``GET /v1/models``
lists one model. A handler that raises answers 500 with the exception text.

>>> with OpenAIServer(lambda req: "pong") as srv:
...     from witness.llm import LLMClient, LLMConfig
...     r = LLMClient(LLMConfig(srv.base_url, "m")).chat([{"role": "user", "content": "ping"}])
>>> r.text, len(srv.requests)
('pong', 1)
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

__all__ = ["OpenAIServer", "Delay", "completion"]


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` before sending ``reply`` (any reply form the handler may return)."""

    seconds: float
    reply: Any = ""


def completion(text: str, *, model: str = "test-model", prompt_tokens: int | None = None,
               completion_tokens: int | None = None, finish_reason: str = "stop") -> dict:
    """An OpenAI ``chat.completion`` body whose one choice says ``text``; usage defaults to
    ``len(text.split())`` completion tokens and 10 prompt tokens.

    >>> completion("a b c")["usage"]["completion_tokens"]
    3
    """
    ct = len(text.split()) if completion_tokens is None else completion_tokens
    pt = 10 if prompt_tokens is None else prompt_tokens
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:  # client gone (timeouts): quiet
        pass


class OpenAIServer:
    """A scripted OpenAI-compatible server (see the module docstring)."""

    def __init__(self, handler: Callable[[dict], Any], port: int = 0):
        self.handler = handler
        self.port = port
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "OpenAIServer":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms Nagle + delayed-ACK stalls on loopback

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: Any, headers: dict | None = None) -> None:
                if isinstance(body, (dict, list)):
                    data, ctype = json.dumps(body).encode(), "application/json"
                else:
                    data, ctype = str(body).encode(), "text/plain"
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, str(v))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _reply(self, reply: Any) -> None:
                if isinstance(reply, Delay):
                    time.sleep(reply.seconds)
                    return self._reply(reply.reply)
                if isinstance(reply, str):
                    return self._send(200, completion(reply))
                if isinstance(reply, tuple):
                    status, body, *rest = reply
                    return self._send(int(status), body, rest[0] if rest else None)
                return self._send(200, reply)

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/").endswith("/models"):
                    return self._send(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]})
                return self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._send(400, {"error": {"message": "malformed JSON body"}})
                with outer._lock:
                    outer.requests.append(body)
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                try:
                    reply = outer.handler(body)
                except Exception as exc:  # a scripted handler failed: say so as a 500
                    return self._send(500, {"error": {"message": f"handler raised {type(exc).__name__}: {exc}"}})
                self._reply(reply)

        self._httpd = _Server(("127.0.0.1", self.port), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


def serve_forever(handler: Callable[[dict], Any], port: int) -> None:  # pragma: no cover - manual use
    """Run a server in the foreground until interrupted (for manual experiments)."""
    srv = OpenAIServer(handler, port)
    srv.start()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
