"""The one seam to the chat endpoint: the reasoner and chat retry the same failures, once each layer, and cost the same."""

from __future__ import annotations

import itertools
import time
from typing import Any

import httpx
import openai
import pytest

from coevo.agent.chat.loop import ChatAgent, ChatModelError
from coevo.agent.chat.store import SessionStore
from coevo.agent.llm_client import EndpointError, LLMSettings, Price, RetryPolicy, chat_model, is_transient
from coevo.agent.reasoners.llm import LLMReasoner, LLMUnavailableError
from coevo.tools import REGISTRY
from tests.fakes.openai_server import FakeOpenAI

REPLY = '{"candidates": [{"design": "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|"}]}'
MSG = [{"role": "user", "content": "propose"}]


def _reasoner(url: str, retries: int, timeout_s: float = 0.5) -> LLMReasoner:
    return LLMReasoner(model="fake-7b", base_url=url, transport_retries=retries, backoff_s=0.01, timeout_s=timeout_s)


def _chat(
    url: str, storage: str, retries: int, *, stream: bool = False, price: tuple[float, float] | None = None, timeout_s: float = 0.5
) -> ChatAgent:
    store = SessionStore(storage)
    return ChatAgent(
        chat_model(LLMSettings(url, "fake-chat", timeout_s=timeout_s, streaming=stream)),
        REGISTRY,
        store,
        store.create("fake-chat"),
        storage=storage,
        confirm=lambda tool, args: True,
        stream=stream,
        price_per_mtok=price,
        retry=RetryPolicy(retries=retries, backoff_s=0.01),
    )


TRANSIENT = [{"status": 429}, {"status": 500}, {"status": 503}, {"raw": "<html>bad gateway</html>"}, {"delay": 1.0, "content": "late"}]
FINAL = [{"status": 401}, {"status": 403}, {"status": 404}, {"status": 400}]


@pytest.mark.parametrize("failure", TRANSIENT, ids=["429", "500", "503", "garbage", "timeout"])
def test_both_callers_retry_a_transient_failure_exactly_as_often_as_their_policy_says(failure: dict[str, Any], storage: str) -> None:
    # two retries, three failures: three requests each, whoever asks; the client library adds none of its own
    with FakeOpenAI(default=failure) as fake, pytest.raises(LLMUnavailableError, match="rerun the same command"):
        _reasoner(fake.url, retries=2).complete(MSG)
    assert len(fake.requests) == 3
    with FakeOpenAI(default=failure) as fake, pytest.raises(ChatModelError, match="ask again"):
        _chat(fake.url, storage, retries=2).turn("hello")
    assert len(fake.requests) == 3


@pytest.mark.parametrize("failure", FINAL, ids=["401", "403", "404", "400"])
def test_both_callers_fail_at_once_on_what_a_retry_cannot_fix(failure: dict[str, Any], storage: str) -> None:
    # a generous timeout: with 0.5 s a loaded machine once turned the 404 into a timeout (transient), then a retry
    with FakeOpenAI(default=failure) as fake, pytest.raises(LLMUnavailableError, match=f"HTTP {failure['status']}"):
        _reasoner(fake.url, retries=3, timeout_s=30).complete(MSG)
    assert len(fake.requests) == 1
    with FakeOpenAI(default=failure) as fake, pytest.raises(ChatModelError, match=f"HTTP {failure['status']}"):
        _chat(fake.url, storage, retries=3, timeout_s=30).turn("hello")
    assert len(fake.requests) == 1


def test_a_rate_limit_waits_as_long_as_the_server_asks() -> None:
    with FakeOpenAI([{"status": 429, "headers": {"Retry-After": "0.6"}}, {"content": REPLY}]) as fake:
        started = time.perf_counter()
        assert _reasoner(fake.url, retries=1).complete(MSG) == REPLY
        waited = time.perf_counter() - started
    assert len(fake.requests) == 2 and waited >= 0.6  # the policy's own backoff is 0.01 s


def test_streamed_text_already_shown_is_never_requested_again(storage: str) -> None:
    with FakeOpenAI([{"content": "Hello there, this streams in pieces."}]) as fake:
        agent = _chat(fake.url, storage, retries=3, stream=True)
        shown: list[str] = []

        def fail_after_first_token(kind: str, data: dict[str, Any]) -> None:
            # stands for the connection dropping mid-stream (the loopback server cannot cut a stream
            # so that the client notices): a transient error once the first text reached the screen
            shown.append(data["text"])
            raise openai.APIConnectionError(request=httpx.Request("POST", fake.url))

        agent.on_event = fail_after_first_token
        with pytest.raises(ChatModelError, match="cannot reach"):
            agent.turn("hi")
    assert len(fake.requests) == 1 and len(shown) == 1  # not retried: the user would see the text twice


def test_a_stream_that_failed_before_any_text_is_retried(storage: str) -> None:
    with FakeOpenAI([{"status": 503}, {"content": "recovered"}]) as fake:
        result = _chat(fake.url, storage, retries=1, stream=True).turn("hi")
    assert result.answer == "recovered" and len(fake.requests) == 2


def test_retry_policy_backs_off_doubling_and_gives_up_with_the_count() -> None:
    calls: list[float] = []
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")

    def failing() -> str:
        calls.append(time.perf_counter())
        raise openai.APITimeoutError(request=request)

    with pytest.raises(EndpointError, match="did not answer in time") as err:
        RetryPolicy(retries=2, backoff_s=0.1).call(failing)
    assert err.value.attempts == 3 and err.value.transient
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2  # 0.1 s, then 0.2 s
    assert RetryPolicy(retries=5, backoff_s=0.0).call(lambda: "fine") == "fine"
    calls.clear()
    with pytest.raises(EndpointError) as err:
        RetryPolicy(retries=5, backoff_s=0.0).call(failing, may_retry=lambda: False)
    assert err.value.attempts == 1 and len(calls) == 1


def test_what_is_transient() -> None:
    request = httpx.Request("POST", "http://h/v1/chat/completions")

    def status(code: int) -> openai.APIStatusError:
        return openai.APIStatusError(f"HTTP {code}", response=httpx.Response(code, request=request), body=None)

    assert [is_transient(status(c)) for c in (429, 500, 502, 503)] == [True] * 4
    assert [is_transient(status(c)) for c in (400, 401, 403, 404, 422)] == [False] * 5
    assert is_transient(openai.APITimeoutError(request=request)) and is_transient(openai.APIConnectionError(request=request))
    assert is_transient(ValueError("not JSON")) and not is_transient(RuntimeError("a bug"))


def test_the_key_stays_out_of_the_record_and_the_repr() -> None:
    settings = LLMSettings("http://h/v1", "m", api_key="sk-canary-in-settings")
    assert "sk-canary" not in repr(settings) and "sk-canary" not in str(settings.public())
    model = chat_model(settings)
    assert "sk-canary" not in repr(model) and model.max_retries == 0  # retries are the policy's, not the client's


def test_chat_and_the_reasoner_cost_tokens_the_same(storage: str) -> None:
    price = Price(0.15, 0.60)
    usage = {"prompt_tokens": 1234, "completion_tokens": 567}
    with FakeOpenAI([{"content": REPLY, **usage}]) as fake:
        r = LLMReasoner(model="fake-7b", base_url=fake.url, price_per_mtok=price)
        r.complete(MSG)
    with FakeOpenAI([{"content": "hi", **usage}]) as fake:
        turn = _chat(fake.url, storage, retries=0, price=price).turn("hello")
    expected = (1234 * 0.15 + 567 * 0.60) / 1e6
    assert r.usage.cost_usd == pytest.approx(expected) and turn.cost_usd == pytest.approx(expected)
    assert price.cost_usd(1234, 567) == pytest.approx(expected)


def test_price_parse() -> None:
    assert Price.parse("0.15,0.60") == (0.15, 0.60)
    with pytest.raises(ValueError, match=r"e\.g\. 0\.15,0\.60"):
        Price.parse("cheap")


def test_chat_price_flag_is_checked(storage: str, capsys: pytest.CaptureFixture[str]) -> None:
    from coevo.agent.cli import main

    with FakeOpenAI([{"content": "hi"}]) as fake:
        code = main(["chat", "--storage", storage, "--llm-base-url", fake.url, "--llm-model", "m", "--llm-price", "x", "--once", "hello"])
    assert code == 2 and "--llm-price" in capsys.readouterr().err and not fake.requests
