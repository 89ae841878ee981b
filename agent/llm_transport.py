"""The HTTP client under every LLM request: one deadline for the whole request, and a size cap on the reply.

The ``openai`` library's (httpx) timeouts bound each socket operation, not a request: a
server (or a stalled proxy) that sends one byte every few seconds keeps every read alive and
a request waiting for ever. :class:`DeadlineClient` gives each request one total deadline:

* connect, sending, the response headers and every read of the body (streamed or not) all
  count against it; a watchdog shuts the request's socket down when it passes, so a read in
  progress ends at once, even while bytes keep dripping, and the request fails with
  :class:`DeadlineExceeded` (a timeout, which the retry policy retries);
* each request opens its own connection (no keep-alive): the watchdog learns the socket when
  it is connected, before any byte of the answer, so nothing of a request escapes it;
* the reply body is counted as it arrives: past ``max_reply_bytes`` (or at once, when the
  ``Content-Length`` says so) the connection is closed and the request fails with
  :class:`ReplyTooLarge`, a malformed reply (retried, then reported); a huge body is never
  read into memory. Replies are asked for uncompressed, so the bytes counted are the bytes
  kept. A server that compresses anyway (``gzip``, ``deflate``) is decoded here, the cap counting
  the decoded bytes (a 200 kB gzip body can hold 200 MB); one in another encoding is refused
  (:class:`ReplyEncodingRefused`), as httpx would otherwise decode it past the cap;
* redirects are not followed: the request (the prompt, the search's data) goes only to the
  endpoint the user named, and a redirect is an HTTP error naming where it pointed.

The client is the ``openai`` library's own (:class:`openai.DefaultHttpxClient`, httpx or,
for ``openai`` 3, httpx2), so proxies from the environment and TLS settings work as before.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

import openai

from coevo.search.config import DEFAULT_LLM_TIMEOUT_S

MAX_REPLY_BYTES = 1024 * 1024
"""The largest reply body read from an LLM endpoint (1 MiB): a reasoner's reply is a few kB, and
a streamed chat answer, at a few hundred bytes of event framing per token, fits some 4000 tokens."""


def _http_library() -> Any:
    """The httpx flavour the installed ``openai`` is built on (httpx2 for ``openai`` 3, else httpx)."""
    try:
        import httpx2

        if issubclass(openai.DefaultHttpxClient, httpx2.Client):
            return httpx2
    except ImportError:
        pass
    import httpx

    return httpx


http: Any = _http_library()


class DeadlineExceeded(http.ReadTimeout):
    """The request did not end within its deadline (a timeout: ``openai`` reports it as one).

    Attributes:
        deadline_s: the deadline, seconds.
    """

    def __init__(self, deadline_s: float, request: Any = None) -> None:
        super().__init__(f"no complete reply within the deadline of {deadline_s:g} s", request=request)
        self.deadline_s = deadline_s


class ReplyTooLarge(ValueError):
    """The reply body was longer than the cap; it was cut off there, unread beyond it.

    Attributes:
        limit: the cap, bytes.
        seen: bytes received (or announced by ``Content-Length``) when it was cut.
    """

    def __init__(self, limit: int, seen: int) -> None:
        super().__init__(f"the reply is longer than {limit} bytes (cut off after {seen} bytes)")
        self.limit = limit
        self.seen = seen


class ReplyEncodingRefused(ValueError):
    """The reply is compressed in an encoding that cannot be decoded under the cap (coevo asked for none)."""

    def __init__(self, encoding: str) -> None:
        super().__init__(f"the reply is compressed ({encoding}) although coevo asked for none; only gzip and deflate are read")
        self.encoding = encoding


DECODED = ("gzip", "x-gzip", "deflate")
"""Content encodings decoded under the cap; any other but ``identity`` is refused."""


class _Watchdog:
    """One request's deadline: shuts the request's sockets down when it passes."""

    def __init__(self, deadline_s: float) -> None:
        self.deadline_s = deadline_s
        self.ends = time.monotonic() + deadline_s
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(deadline_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return max(0.001, self.ends - time.monotonic())

    def watch(self, sock: socket.socket | None) -> None:
        """Shut ``sock`` down at the deadline (at once if it already passed)."""
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            late = self.expired
        if late:
            self._shut(sock)

    def trace(self, name: str, info: dict[str, Any]) -> None:
        """The transport's ``trace`` extension: learn the socket as soon as it is connected."""
        if name.endswith(("connect_tcp.complete", "connect_unix_socket.complete")):
            stream = info.get("return_value")
            self.watch(stream.get_extra_info("socket") if stream is not None else None)

    def cancel(self) -> None:
        self._timer.cancel()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)  # a read blocked in another thread returns at once


class _GuardedStream(http.SyncByteStream):
    """A response body read under the request's deadline and size cap."""

    def __init__(self, inner: Any, dog: _Watchdog, limit: int, request: Any, encoding: str | None = None) -> None:
        self.inner = inner
        self.dog = dog
        self.limit = limit
        self.request = request
        # gzip and zlib-wrapped deflate, told apart by their headers; at most limit + 1 bytes out per piece in
        self.decoder = zlib.decompressobj(zlib.MAX_WBITS | 32) if encoding else None

    def _decoded(self, chunk: bytes, seen: int) -> bytes:
        """``chunk`` decompressed (as is when the reply is not compressed), never more than the cap allows plus one byte."""
        if self.decoder is None:
            return chunk
        try:
            return self.decoder.decompress(chunk, self.limit + 1 - seen)
        except zlib.error as exc:
            raise http.DecodingError(f"the compressed reply is corrupt: {exc}", request=self.request) from None

    def __iter__(self) -> Iterator[bytes]:
        seen = received = 0  # bytes handed on (decoded), bytes received
        try:
            for raw in self.inner:
                if self.dog.expired:
                    raise DeadlineExceeded(self.dog.deadline_s, self.request)
                received += len(raw)
                chunk = self._decoded(raw, seen)
                seen += len(chunk)
                if max(seen, received) > self.limit:
                    raise ReplyTooLarge(self.limit, max(seen, received))
                yield chunk
            if self.decoder is not None:
                seen += len(tail := self.decoder.flush())
                if seen > self.limit:
                    raise ReplyTooLarge(self.limit, seen)
                yield tail
            if self.dog.expired:  # the watchdog's shutdown can read as the end of a body without a length
                raise DeadlineExceeded(self.dog.deadline_s, self.request)
        except http.TransportError as exc:
            if self.dog.expired and not isinstance(exc, DeadlineExceeded):
                raise DeadlineExceeded(self.dog.deadline_s, self.request) from exc
            raise
        finally:
            if max(seen, received) > self.limit or self.dog.expired:
                self.close()

    def close(self) -> None:
        self.dog.cancel()
        self.inner.close()


class DeadlineClient(openai.DefaultHttpxClient):
    """The ``openai`` library's HTTP client with a total deadline and a reply cap per request (module doc).

    Args:
        deadline_s: seconds for a whole request: connect, send, headers and body.
        max_reply_bytes: the longest reply body read.
        kwargs: passed to the ``openai`` library's client.
    """

    def __init__(self, deadline_s: float = DEFAULT_LLM_TIMEOUT_S, max_reply_bytes: int = MAX_REPLY_BYTES, **kwargs: Any) -> None:
        kwargs.setdefault("limits", http.Limits(max_connections=100, max_keepalive_connections=0))
        kwargs.setdefault("timeout", http.Timeout(deadline_s))
        kwargs["follow_redirects"] = False  # the openai client follows them; the prompt goes only where the user said
        super().__init__(**kwargs)
        self.deadline_s = deadline_s
        self.max_reply_bytes = max_reply_bytes

    def send(self, request: Any, *, stream: bool = False, **kwargs: Any) -> Any:
        """Send ``request`` under its deadline; the body is read here unless ``stream`` (then as the caller reads it)."""
        dog = _Watchdog(self.deadline_s)
        left = dog.remaining()
        # every socket operation waits at most what is left; the watchdog ends the request when nothing is left
        request.extensions = {
            **request.extensions,
            "timeout": {"connect": left, "read": left, "write": left, "pool": left},
            "trace": dog.trace,
        }
        request.headers["Accept-Encoding"] = "identity"  # counted bytes are kept bytes: no decompression bomb
        kwargs["follow_redirects"] = False
        try:
            response = super().send(request, stream=True, **kwargs)
        except http.TransportError as exc:
            dog.cancel()
            if dog.expired and not isinstance(exc, DeadlineExceeded):
                raise DeadlineExceeded(self.deadline_s, request) from exc
            raise
        except BaseException:
            dog.cancel()
            raise
        try:
            self._check(response, dog, request)
            if not stream:
                response.read()
        except BaseException:
            response.close()
            dog.cancel()
            raise
        return response

    def _check(self, response: Any, dog: _Watchdog, request: Any) -> None:
        """Refuse a reply that is late or announced too long; read the rest under the guard."""
        if dog.expired:
            raise DeadlineExceeded(self.deadline_s, request)
        announced = response.headers.get("content-length", "")
        if announced.isdigit() and int(announced) > self.max_reply_bytes:
            raise ReplyTooLarge(self.max_reply_bytes, int(announced))
        network = response.extensions.get("network_stream")
        if network is not None:
            dog.watch(network.get_extra_info("socket"))  # the connection actually used, whichever it is
        encodings = [e.strip().lower() for e in response.headers.get_list("content-encoding", split_commas=True)]
        encodings = [e for e in encodings if e not in ("", "identity")]
        if len(encodings) > 1 or (encodings and encodings[0] not in DECODED):
            raise ReplyEncodingRefused(", ".join(encodings))
        if encodings:
            del response.headers["content-encoding"]  # decoded below, under the cap: httpx must not decode it again
        response.stream = _GuardedStream(response.stream, dog, self.max_reply_bytes, request, encodings[0] if encodings else None)


def guarded(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The ``kind`` exception behind ``exc`` (itself or a cause, as ``openai`` wraps transport errors), if any."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


__all__ = ["MAX_REPLY_BYTES", "DeadlineClient", "DeadlineExceeded", "ReplyEncodingRefused", "ReplyTooLarge", "guarded", "http"]
