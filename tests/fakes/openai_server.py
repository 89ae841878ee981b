"""A loopback HTTP server speaking the OpenAI chat-completions protocol, scripted per test.

The real client stack (LangChain -> openai -> httpx) talks to it over 127.0.0.1, so tests
exercise the same code path as a hosted API, vLLM, llama.cpp or Ollama.

A script is a list of steps, used in order, then ``default`` for every later request. A
step is a dict (or a callable taking the request JSON and returning one):

* ``{"content": "..."}`` a normal reply (``prompt_tokens`` / ``completion_tokens`` optional);
* ``{"refusal": "..."}`` a refusal (content null, refusal set);
* ``{"status": 500}`` an HTTP error with an OpenAI-style error body (``headers`` optional,
  e.g. ``{"Retry-After": "0.3"}``);
* ``{"raw": "..."}`` a 200 with a body that is not JSON;
* ``{"delay": 2.0, ...}`` sleep first (for client timeouts), then the rest of the step;
* ``{"drip": 0.3, ...}`` send the answer one byte every 0.3 s (headers first, then the
  body), as a stalled proxy or an overloaded server does: every read gets a byte, so only a
  deadline on the whole request ends it; ``"drip_from": 300`` sends the first 300 bytes at
  once (the headers, the first events of a stream) and drips the rest;
* ``{"bulk": 5_000_000}`` a valid completion whose content is that many ``x`` characters,
  written in 64 KiB pieces without a ``Content-Length`` (``"length": True`` adds one), so
  a client must cut it while reading; :attr:`FakeOpenAI.sent` counts the body bytes that
  left the server before the client hung up;
* ``{"tool_calls": [{"name": "nb201_query", "arguments": {...}}]}`` the model calls tools
  (``arguments`` may be a string, e.g. malformed JSON), with optional ``content``.

``GET /v1/models`` lists the served models (``models``, default one fake model) without
using a step, as a server's health check; ``models=None`` makes it answer 404, as servers
without that route do.

A request with ``"stream": true`` is answered as server-sent events, as the OpenAI API
does: content in small deltas, tool-call arguments in pieces, then the finish reason and,
when ``stream_options.include_usage`` is set, a usage chunk.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


class FakeOpenAI:
    """Context manager running the server on a free loopback port."""

    def __init__(self, script: list[Step] | None = None, default: Step | None = None, models: Sequence[str] | None = ("fake-7b",)) -> None:
        self.script = list(script or [])
        self.default = default
        self.models = list(models) if models is not None else None
        self.model_requests = 0
        self.requests: list[dict[str, Any]] = []
        self.sent: list[int] = []
        """Bytes of the body written per dripped or bulk answer, once the answer ended (the client may have hung up)."""
        self.dripping = threading.Event()
        """Set when a dripped answer has started (a test can interrupt the client then)."""
        self.authorizations: list[str | None] = []
        """The ``Authorization`` header of every request, in order (which API key the client sent)."""
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"fake": self})  # the handler class is per server: it answers for this one
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL to give the client (``.../v1``)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def user_prompts(self) -> list[str]:
        """The last user message of every request received."""
        return [next(m["content"] for m in reversed(r["messages"]) if m["role"] == "user") for r in self.requests]


class _Handler(BaseHTTPRequestHandler):
    """Answers as the scripted OpenAI server; ``fake`` is set on a subclass per server (:class:`FakeOpenAI`)."""

    fake: FakeOpenAI

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.fake.model_requests += 1
        if self.path.rstrip("/").endswith("/models") and self.fake.models is not None:
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.fake.models]
            self._send(200, json.dumps({"object": "list", "data": data}))
            return
        self._send(404, json.dumps({"error": {"message": f"no route {self.path}", "type": "not_found"}}))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        with self.fake._lock:
            self.fake.requests.append(body)
            self.fake.authorizations.append(self.headers.get("Authorization"))
            step = self.fake.script.pop(0) if self.fake.script else self.fake.default
        if step is None:
            step = {"status": 500, "message": "script exhausted"}
        if callable(step):
            step = step(body)
        if step.get("delay"):
            time.sleep(step["delay"])
        self._drip_s = float(step.get("drip", 0.0))
        self._drip_from = int(step.get("drip_from", 0))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            self._answer(body, step)

    def _answer(self, body: dict[str, Any], step: dict[str, Any]) -> None:
        if "status" in step:
            self._send(
                step["status"],
                json.dumps({"error": {"message": step.get("message", "scripted error"), "type": "server_error"}}),
                step.get("headers", {}),
            )
            return
        if "raw" in step:
            self._send(200, step["raw"])
            return
        if "bulk" in step:
            self._bulk(body, int(step["bulk"]), bool(step.get("length")))
            return
        message: dict[str, Any] = {"role": "assistant", "content": step.get("content"), "refusal": step.get("refusal")}
        calls = [
            {
                "id": f"call_{len(self.fake.requests)}_{k}",
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"]),
                },
            }
            for k, c in enumerate(step.get("tool_calls", []))
        ]
        if calls:
            message["tool_calls"] = calls
        finish = "tool_calls" if calls else "stop"
        usage = {"prompt_tokens": step.get("prompt_tokens", 100), "completion_tokens": step.get("completion_tokens", 20)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if body.get("stream"):
            self._stream(body, message, calls, finish, usage)
            return
        reply = {
            "id": f"chatcmpl-{len(self.fake.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        self._send(200, json.dumps(reply))

    def _stream(
        self, body: dict[str, Any], message: dict[str, Any], calls: list[dict[str, Any]], finish: str, usage: dict[str, int]
    ) -> None:
        base = {"id": f"chatcmpl-{len(self.fake.requests)}", "object": "chat.completion.chunk", "created": 0, "model": body.get("model")}

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            data = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            return f"data: {json.dumps(data)}\n\n".encode()

        parts = [chunk({"role": "assistant", "content": ""})]
        text = message.get("content") or ""
        parts += [chunk({"content": text[i : i + 7]}) for i in range(0, len(text), 7)]
        if message.get("refusal"):
            parts.append(chunk({"refusal": message["refusal"]}))
        for k, call in enumerate(calls):
            args = call["function"]["arguments"]
            head = {
                "index": k,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            parts.append(chunk({"tool_calls": [head]}))
            parts += [chunk({"tool_calls": [{"index": k, "function": {"arguments": args[i : i + 9]}}]}) for i in range(0, len(args), 9)]
        parts.append(chunk({}, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            parts.append(f"data: {json.dumps({**base, 'choices': [], 'usage': usage})}\n\n".encode())
        parts.append(b"data: [DONE]\n\n")
        if self._drip_s:
            self._dripped(b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + b"".join(parts))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for part in parts:
            self.wfile.write(part)
            self.wfile.flush()

    def _send(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        data = text.encode()
        if self._drip_s:
            head = f"HTTP/1.0 {status} OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
            self._dripped(head.encode() + data)
            return
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    _drip_s = 0.0
    _drip_from = 0

    def _dripped(self, data: bytes) -> None:
        """The whole answer (status line included), its first ``drip_from`` bytes at once, then one byte at a time."""
        sent = 0
        try:
            self.wfile.write(data[: self._drip_from])
            self.wfile.flush()
            sent = min(len(data), self._drip_from)
            self.fake.dripping.set()
            for k in range(sent, len(data)):
                self.wfile.write(data[k : k + 1])
                self.wfile.flush()
                sent += 1
                time.sleep(self._drip_s)
        finally:
            with self.fake._lock:
                self.fake.sent.append(sent)

    def _bulk(self, body: dict[str, Any], size: int, length: bool) -> None:
        """A completion whose content is ``size`` characters, written piece by piece."""
        head = (
            b'{"id": "chatcmpl-bulk", "object": "chat.completion", "created": 0, "model": "fake", '
            b'"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "'
        )
        tail = b'"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if length:
            self.send_header("Content-Length", str(len(head) + size + len(tail)))
        self.end_headers()
        sent = 0
        piece = b"x" * 65536
        try:
            self.wfile.write(head)
            sent += len(head)
            while sent - len(head) < size:
                chunk = piece[: size - (sent - len(head))]
                self.wfile.write(chunk)
                sent += len(chunk)
            self.wfile.write(tail)
            sent += len(tail)
        finally:
            with self.fake._lock:
                self.fake.sent.append(sent)
