"""The one seam to an OpenAI-compatible chat endpoint, shared by the LLM reasoner and ``coevo chat``.

Everything both callers need from the outside world is built here, from one
:class:`LLMSettings` record: the LangChain chat model (:func:`chat_model`), the plain
``openai`` client for health checks (:func:`openai_client`), the retry policy
(:class:`RetryPolicy`), the description of a failure (:func:`describe_failure`) and token
cost (:class:`Price`, :func:`token_usage`).

Retry policy (one, for every caller):

* Retries happen in exactly one place, :meth:`RetryPolicy.call`. Every client built here has
  the ``openai`` library's own retries turned off (``max_retries=0``), so a request is never
  retried by two layers with two backoffs and two lists of errors.
* What is retried is the same for everyone (:func:`is_transient`): timeouts, connection
  errors, HTTP 429 and 5xx, and a 200 whose body is not a chat completion (a proxy's error
  page). Anything else (401, 403, 404, 400, 422) fails at once: a retry cannot fix a key or a
  model name, and the message says what to change.
* Backoff doubles from ``backoff_s``; a 429 with a ``Retry-After`` header waits at least that
  long (at most :data:`MAX_RETRY_AFTER_S`).
* Only the number of retries differs, and it is the caller's to say: a search
  (:data:`SEARCH_RETRY`) has nobody waiting and a failure stops the whole run, so it retries
  3 times (1, 2, 4 s); chat (:data:`CHAT_RETRY`) has a person waiting and a failed turn only
  asks them to ask again, so it retries once, after half a second.
* A streamed reply is retried only before its first chunk reached the caller: once text is
  on the screen, a retry would show it twice.
* ``timeout_s`` (``--llm-timeout``) is a deadline for the whole request, connect and every
  read of the body included, and a reply longer than ``max_reply_bytes`` is cut off while it
  is read (:mod:`agent.llm_transport`); both failures are retried as above (a late reply as a
  timeout, an oversized one as a malformed body).
* A stop asked by a signal (Ctrl-C, SIGTERM) while a request or its backoff is under way
  stops at once, even where the signal's handler only asks for a graceful stop (a search
  worker's, which otherwise finishes what it is doing): the request is abandoned with
  ``KeyboardInterrupt``, nothing of it is kept, and a rerun resumes. A request is not an
  evaluation: no paid work is lost.

The API key lives only in :class:`LLMSettings` (never in its ``repr`` or
:meth:`LLMSettings.public`) and in the clients; nothing here logs or records it.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import openai
from pydantic import ValidationError

from coevo.agent.llm_transport import (
    MAX_REPLY_BYTES,
    DeadlineClient,
    DeadlineExceeded,
    ReplyEncodingRefused,
    ReplyTooLarge,
    guarded,
    http,
)
from coevo.search.config import DEFAULT_LLM_TIMEOUT_S
from coevo.search.errors import CoevoError
from coevo.tools import parse_arguments

log = logging.getLogger(__name__)
T = TypeVar("T")

NO_KEY = "not-needed"
"""Sent as the key when none is given: local servers (vLLM, llama.cpp, Ollama) accept anything."""

MAX_RETRY_AFTER_S = 60.0
"""The longest ``Retry-After`` a retry honours; a server asking for more gets the usual backoff and the retries run out."""

TRANSIENT = (openai.APITimeoutError, openai.APIConnectionError, http.TransportError)
"""Transport failures worth retrying besides HTTP 429 and 5xx (a streamed body's own read errors reach the caller unwrapped)."""

MALFORMED = (openai.APIResponseValidationError, ValidationError, ValueError, TypeError, KeyError, json.JSONDecodeError)
"""What the client stack raises on a 200 whose body is not a chat completion (checked after the ``openai`` errors)."""


@dataclass(frozen=True)
class LLMSettings:
    """Where and how to reach a chat model: one record for every client built here.

    Attributes:
        base_url: the endpoint, e.g. ``http://localhost:8000/v1``.
        model: the model name the endpoint serves.
        api_key: the key; None sends :data:`NO_KEY`. Never shown by ``repr`` nor :meth:`public`.
        timeout_s: the deadline of a whole request (connect and every read of the reply).
        temperature: sampling temperature.
        streaming: ask for usage in streamed replies (chat streams; the reasoner does not).
        max_reply_bytes: the longest reply body read; a longer one is cut off and counts as malformed.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = DEFAULT_LLM_TIMEOUT_S
    temperature: float = 0.2
    streaming: bool = False
    max_reply_bytes: int = MAX_REPLY_BYTES

    def http_client(self, timeout_s: float | None = None) -> DeadlineClient:
        """The HTTP client of a request: its deadline (``timeout_s``, else the settings') and the reply cap."""
        return DeadlineClient(self.timeout_s if timeout_s is None else timeout_s, self.max_reply_bytes)

    def public(self) -> dict[str, Any]:
        """The settings that may be recorded (study attributes, logs): everything but the key.

        >>> LLMSettings("http://h/v1", "m", api_key="sk-secret").public()
        {'base_url': 'http://h/v1', 'model': 'm', 'timeout_s': 60.0, 'temperature': 0.2, 'streaming': False}
        """
        return {
            "base_url": self.base_url,
            "model": self.model,
            "timeout_s": self.timeout_s,
            "temperature": self.temperature,
            "streaming": self.streaming,
        }


NOT_JSON = "\x00"
"""Put before a tool call's argument text that is JSON but not an object, so that LangChain reads the call as invalid."""


@functools.cache
def _chat_openai() -> type[Any]:
    """``ChatOpenAI`` reading a whole reply whose tool call has arguments that are JSON but not an object.

    LangChain (langchain-openai 1.8, langchain-ai/langchain#35990) parses such arguments (``[1, 2]``) into a list,
    and building the reply's ``AIMessage`` then fails for the whole reply: a non-streamed chat turn lost the model's
    text and its other calls, and was retried as a malformed body. A streamed reply's calls are read by coevo
    (``agent.chat.loop.read_tool_calls``). Here, only when LangChain's reading fails, the reply is read again with
    those arguments marked as not JSON, so each becomes one invalid tool call carrying its text as sent.
    """
    from langchain_openai import ChatOpenAI

    class ReadingChatOpenAI(ChatOpenAI):
        def _create_chat_result(self, response: Any, generation_info: dict[str, Any] | None = None) -> Any:
            try:
                return super()._create_chat_result(response, generation_info)
            except ValidationError:
                marked = _mark_non_object_arguments(response)
                if marked is None:
                    raise
            result = super()._create_chat_result(marked, generation_info)
            for generation in result.generations:
                for call in getattr(generation.message, "invalid_tool_calls", []):
                    if isinstance(call.get("args"), str) and call["args"].startswith(NOT_JSON):
                        call["args"] = call["args"][len(NOT_JSON) :]
            return result

    return ReadingChatOpenAI


def _mark_non_object_arguments(response: Any) -> dict[str, Any] | None:
    """``response`` as a dict with each tool call's argument text that is JSON but not an object marked
    (:data:`NOT_JSON`); None when there is none (the reply failed for another reason)."""
    # a copy: the caller's reply (a dict LangChain may hold on to) stays as the endpoint sent it
    reply = copy.deepcopy(response) if isinstance(response, dict) else response.model_dump(warnings=False)
    marked = False
    for choice in reply.get("choices") or []:
        for call in (choice.get("message") or {}).get("tool_calls") or []:
            text = (call.get("function") or {}).get("arguments")
            # read as every tool call's arguments are (text that is not JSON at all LangChain already calls invalid)
            if isinstance(text, str) and parse_arguments(text)[0] is None:
                call["function"]["arguments"], marked = NOT_JSON + text, True
    return reply if marked else None


def chat_model(settings: LLMSettings) -> Any:
    """A LangChain ``ChatOpenAI`` for the endpoint, with the client's own retries off (see the module doc).

    Returns ``Any`` so that importing this module does not import ``langchain_openai``.
    """
    from pydantic import SecretStr

    return _chat_openai()(
        model=settings.model,
        base_url=settings.base_url,
        api_key=SecretStr(settings.api_key or NO_KEY),
        timeout=settings.timeout_s,
        max_retries=0,
        temperature=settings.temperature,
        stream_usage=settings.streaming,
        http_client=settings.http_client(),
    )


def openai_client(settings: LLMSettings, *, timeout_s: float | None = None) -> openai.OpenAI:
    """A plain ``openai.OpenAI`` client for the endpoint (health checks), retries off.

    Args:
        settings: the endpoint.
        timeout_s: the deadline of a request instead of ``settings.timeout_s``.
    """
    deadline = settings.timeout_s if timeout_s is None else timeout_s
    return openai.OpenAI(
        base_url=settings.base_url,
        api_key=settings.api_key or NO_KEY,
        timeout=deadline,
        max_retries=0,
        http_client=settings.http_client(deadline),
    )


# ------------------------------------------------------------------ failures


class EndpointError(CoevoError):
    """The endpoint failed: not transient, or still failing after the policy's retries.

    Attributes:
        transient: the last failure was of a kind that is retried (the retries ran out).
        attempts: requests made.
    """

    def __init__(self, message: str, *, transient: bool, attempts: int) -> None:
        super().__init__(message)
        self.transient = transient
        self.attempts = attempts


def is_transient(exc: BaseException) -> bool:
    """Whether a failed request is worth repeating (module doc): timeouts, connection errors, 429, 5xx, a malformed body."""
    if isinstance(exc, TRANSIENT):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500  # other 4xx: the request or the key is wrong
    return isinstance(exc, MALFORMED)


def describe_failure(exc: BaseException, where: str = "the LLM endpoint") -> str:
    """One line saying what went wrong with a request and what to change; never the key.

    Args:
        exc: what the client stack raised.
        where: how to name the endpoint (``the LLM endpoint http://...``).
    """
    late = guarded(exc, DeadlineExceeded)
    if isinstance(late, DeadlineExceeded):
        return (
            f"{where} did not answer in time: its reply did not finish within {late.deadline_s:g} s "
            "(--llm-timeout, the whole request); raise it if the endpoint is just slow"
        )
    big = guarded(exc, ReplyTooLarge)
    if isinstance(big, ReplyTooLarge):
        return f"{where} sent a reply longer than {big.limit} bytes, cut off there (a malformed reply: a chat completion is far shorter)"
    packed = guarded(exc, ReplyEncodingRefused)
    if isinstance(packed, ReplyEncodingRefused):
        return f"{where} sent a reply compressed as {packed.encoding!r} although none was asked for; serve it uncompressed or as gzip"
    if isinstance(exc, openai.APITimeoutError | http.TimeoutException):
        return f"{where} did not answer in time; raise --llm-timeout if it is just slow"
    if isinstance(exc, openai.APIConnectionError | http.TransportError):
        return f"cannot reach {where} ({exc}): start the server or fix COEVO_LLM_BASE_URL / --llm-base-url"
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return f"{where} refused the API key (HTTP {exc.status_code}): set OPENAI_API_KEY or --llm-api-key"
    if isinstance(exc, openai.RateLimitError):
        return f"{where} is rate-limiting (HTTP 429); wait a moment"
    if isinstance(exc, openai.APIStatusError) and 300 <= exc.status_code < 400:
        location = exc.response.headers.get("location", "?")
        return (
            f"{where} redirected the request (HTTP {exc.status_code}) to {location}; LLM requests follow no redirect "
            "(the prompt goes only where you said): pass the endpoint's own address as --llm-base-url / COEVO_LLM_BASE_URL"
        )
    if isinstance(exc, openai.APIStatusError):
        return f"{where} answered HTTP {exc.status_code}: {exc.message}"
    return f"{where} sent a reply that is not an OpenAI chat completion ({type(exc).__name__}: {exc})"


def _retry_after_s(exc: BaseException) -> float | None:
    """Seconds a 429's ``Retry-After`` header asks for, when it gives a number."""
    response = getattr(exc, "response", None)
    if not isinstance(exc, openai.RateLimitError) or response is None:
        return None
    try:
        return float(response.headers.get("retry-after", ""))
    except ValueError:
        return None


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is repeated (the module doc is the policy).

    Attributes:
        retries: repeats after the first request (0: none).
        backoff_s: the first wait; it doubles per retry.
    """

    retries: int = 3
    backoff_s: float = 1.0

    def call(self, request: Callable[[], T], *, where: str = "the LLM endpoint", may_retry: Callable[[], bool] | None = None) -> T:
        """Run ``request``, repeating it on transient failures.

        Args:
            request: one request (it raises what the client stack raises).
            where: the endpoint's name in messages.
            may_retry: asked before each retry; False gives up at once (a stream that
                already delivered text).

        Raises:
            EndpointError: a failure that is not transient, or the retries ran out; the
                message comes from :func:`describe_failure`.
        """
        with _signals_abandon_the_request():
            return self._call(request, where, may_retry)

    def _call(self, request: Callable[[], T], where: str, may_retry: Callable[[], bool] | None) -> T:
        delay = self.backoff_s
        for attempt in range(1, self.retries + 2):
            try:
                return request()
            except Exception as exc:
                transient = is_transient(exc)
                last = attempt > self.retries or not transient or (may_retry is not None and not may_retry())
                if last:
                    raise EndpointError(describe_failure(exc, where), transient=transient, attempts=attempt) from exc
                wait = delay
                asked = _retry_after_s(exc)
                if asked is not None and asked <= MAX_RETRY_AFTER_S:
                    wait = max(wait, asked)
                log.warning(
                    "LLM request failed (%s), attempt %d/%d; retrying in %.1f s", type(exc).__name__, attempt, self.retries + 1, wait
                )
                time.sleep(wait)
                delay *= 2
        raise AssertionError("unreachable: the last attempt returns or raises")


@contextmanager
def _signals_abandon_the_request() -> Iterator[None]:
    """While a request (or its backoff) runs, a SIGINT/SIGTERM handled by Python code also raises ``KeyboardInterrupt``.

    A search worker's handler only sets its stop flag (it finishes the evaluation at hand); the
    handler still runs first, so the worker knows it is to stop, and then the request is
    abandoned instead of running to its deadline and its retries. Default handlers are left
    alone (Ctrl-C already raises; SIGTERM already ends the process); so is every thread but
    the main one, where Python runs no signal handler.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Callable[[int, Any], Any]] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(sig)
        if callable(handler) and handler is not signal.default_int_handler:
            previous[sig] = handler

    def abandon(signum: int, frame: Any) -> None:
        previous[signum](signum, frame)  # the owner's handler first (a second Ctrl-C raises there)
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name} during an LLM request")

    for signum in previous:
        signal.signal(signum, abandon)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


SEARCH_RETRY = RetryPolicy(retries=3, backoff_s=1.0)
"""A search's requests: nobody waits on them and a failure stops the run (module doc)."""

CHAT_RETRY = RetryPolicy(retries=1, backoff_s=0.5)
"""Chat's requests: a person waits, and a failed turn only asks them to ask again (module doc)."""


# ------------------------------------------------------------------ what comes from the model


def clean_text(value: T) -> T:
    """``value`` (a string, or dicts and lists of them) with every lone surrogate replaced by U+FFFD.

    A JSON reply may carry ``"\\ud800"``, which decodes to a string no UTF-8 can hold: printed,
    stored in SQLite or sent on, it raises ``UnicodeEncodeError``. Whatever a model says goes
    through here first.

    >>> clean_text({"a": ["x\\ud800y"]}) == {"a": ["x\\ufffdy"]}
    True
    """
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")  # type: ignore[return-value]
        return value
    if isinstance(value, dict):
        return {clean_text(k): clean_text(v) for k, v in value.items()}  # type: ignore[return-value]
    if isinstance(value, list):
        return [clean_text(v) for v in value]  # type: ignore[return-value]
    return value


# ------------------------------------------------------------------ what goes back to the model


def truncate_result(text: str, max_bytes: int) -> str:
    """A tool result as the model gets it: whole, or its first ``max_bytes`` bytes (UTF-8) and a note saying how much.

    >>> print(truncate_result("abcdef", 4))
    abcd
    [truncated: 4 of 6 bytes; ask for less, e.g. fewer designs or a narrower query]
    """
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    head = data[:max_bytes].decode(errors="ignore")  # never half a character
    return f"{head}\n[truncated: {len(head.encode())} of {len(data)} bytes; ask for less, e.g. fewer designs or a narrower query]"


# ------------------------------------------------------------------ tokens and cost


class Price(NamedTuple):
    """USD per million tokens, prompt (input) and completion (output)."""

    input_per_mtok: float
    output_per_mtok: float

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Cost of one call.

        >>> Price(0.15, 0.60).cost_usd(1_000_000, 500_000)
        0.45
        """
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6

    @classmethod
    def parse(cls, text: str) -> Price:
        """``"input,output"`` as given to ``--llm-price``, e.g. ``0.15,0.60``.

        Raises:
            ValueError: not two numbers separated by a comma (the message gives an example).
        """
        try:
            a, b = (float(x) for x in text.split(","))
        except ValueError:
            raise ValueError(f"give input,output USD per million tokens, e.g. 0.15,0.60 (got {text!r})") from None
        return cls(a, b)


def token_usage(message: Any) -> tuple[int, int]:
    """(prompt, completion) tokens a LangChain reply reports (0 where the server said nothing)."""
    usage = getattr(message, "usage_metadata", None) or {}
    return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))


__all__ = [
    "CHAT_RETRY",
    "MAX_REPLY_BYTES",
    "SEARCH_RETRY",
    "EndpointError",
    "LLMSettings",
    "Price",
    "RetryPolicy",
    "chat_model",
    "clean_text",
    "describe_failure",
    "is_transient",
    "openai_client",
    "token_usage",
    "truncate_result",
]
