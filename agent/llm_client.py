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

The API key lives only in :class:`LLMSettings` (never in its ``repr`` or
:meth:`LLMSettings.public`) and in the clients; nothing here logs or records it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import openai
from pydantic import ValidationError

from coevo.search.config import DEFAULT_LLM_TIMEOUT_S
from coevo.search.errors import CoevoError

log = logging.getLogger(__name__)
T = TypeVar("T")

NO_KEY = "not-needed"
"""Sent as the key when none is given: local servers (vLLM, llama.cpp, Ollama) accept anything."""

MAX_RETRY_AFTER_S = 60.0
"""The longest ``Retry-After`` a retry honours; a server asking for more gets the usual backoff and the retries run out."""

TRANSIENT = (openai.APITimeoutError, openai.APIConnectionError)
"""Transport failures worth retrying besides HTTP 429 and 5xx."""

MALFORMED = (openai.APIResponseValidationError, ValidationError, ValueError, TypeError, KeyError, json.JSONDecodeError)
"""What the client stack raises on a 200 whose body is not a chat completion (checked after the ``openai`` errors)."""


@dataclass(frozen=True)
class LLMSettings:
    """Where and how to reach a chat model: one record for every client built here.

    Attributes:
        base_url: the endpoint, e.g. ``http://localhost:8000/v1``.
        model: the model name the endpoint serves.
        api_key: the key; None sends :data:`NO_KEY`. Never shown by ``repr`` nor :meth:`public`.
        timeout_s: seconds per request.
        temperature: sampling temperature.
        streaming: ask for usage in streamed replies (chat streams; the reasoner does not).
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = DEFAULT_LLM_TIMEOUT_S
    temperature: float = 0.2
    streaming: bool = False

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


def chat_model(settings: LLMSettings) -> Any:
    """A LangChain ``ChatOpenAI`` for the endpoint, with the client's own retries off (see the module doc).

    Returns ``Any`` so that importing this module does not import ``langchain_openai``.
    """
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    return ChatOpenAI(
        model=settings.model,
        base_url=settings.base_url,
        api_key=SecretStr(settings.api_key or NO_KEY),
        timeout=settings.timeout_s,
        max_retries=0,
        temperature=settings.temperature,
        stream_usage=settings.streaming,
    )


def openai_client(settings: LLMSettings, *, timeout_s: float | None = None) -> openai.OpenAI:
    """A plain ``openai.OpenAI`` client for the endpoint (health checks), retries off.

    Args:
        settings: the endpoint.
        timeout_s: per-request timeout instead of ``settings.timeout_s``.
    """
    return openai.OpenAI(
        base_url=settings.base_url,
        api_key=settings.api_key or NO_KEY,
        timeout=settings.timeout_s if timeout_s is None else timeout_s,
        max_retries=0,
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
    if isinstance(exc, openai.APITimeoutError):
        return f"{where} did not answer in time; raise --llm-timeout if it is just slow"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot reach {where} ({exc}): start the server or fix COEVO_LLM_BASE_URL / --llm-base-url"
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return f"{where} refused the API key (HTTP {exc.status_code}): set OPENAI_API_KEY or --llm-api-key"
    if isinstance(exc, openai.RateLimitError):
        return f"{where} is rate-limiting (HTTP 429); wait a moment"
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


SEARCH_RETRY = RetryPolicy(retries=3, backoff_s=1.0)
"""A search's requests: nobody waits on them and a failure stops the run (module doc)."""

CHAT_RETRY = RetryPolicy(retries=1, backoff_s=0.5)
"""Chat's requests: a person waits, and a failed turn only asks them to ask again (module doc)."""


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
    "SEARCH_RETRY",
    "EndpointError",
    "LLMSettings",
    "Price",
    "RetryPolicy",
    "chat_model",
    "describe_failure",
    "is_transient",
    "openai_client",
    "token_usage",
]
