"""The LLM path end to end against a loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import optuna
import pytest

from coevo.agent.coevolution import make_pelnas
from coevo.agent.reasoners import make_reasoner
from coevo.agent.reasoners.cache import ResponseCache
from coevo.agent.reasoners.llm import LLMReasoner, LLMReplyError, LLMUnavailableError, ProposeOut, extract_json
from coevo.knowledge.report import write_report
from coevo.knowledge.store import KnowledgeStore
from coevo.search.errors import CoevoError, UserInputError
from coevo.search.nb201 import NB201Problem
from coevo.search.round_log import read_round_logs
from coevo.search.runner import run_search
from tests.fakes import nb201_model
from tests.fakes.openai_server import FakeOpenAI

GOOD = json.dumps({"candidates": [{"design": "|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|", "rationale": "r"}]})


def reasoner(url: str, storage: str | None = None, **kw: object) -> LLMReasoner:
    opts = {"backoff_s": 0.01, "timeout_s": 5.0, **kw}
    return LLMReasoner(model="fake-7b", base_url=url, cache=ResponseCache(storage) if storage else None, **opts)  # type: ignore[arg-type]


MSG = [{"role": "user", "content": "propose"}]


def test_valid_reply_and_token_accounting() -> None:
    with FakeOpenAI([{"content": GOOD, "prompt_tokens": 321, "completion_tokens": 45}]) as fake:
        r = reasoner(fake.url, price_per_mtok=(1.0, 2.0))
        out = r.structured(MSG, ProposeOut)
    assert out.candidates[0].rationale == "r"
    assert (r.usage.calls, r.usage.prompt_tokens, r.usage.completion_tokens) == (1, 321, 45)
    assert r.usage.cost_usd == pytest.approx((321 * 1 + 45 * 2) / 1e6)
    assert fake.requests[0]["model"] == "fake-7b"


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ({"content": "I think you should try more convolutions."}, "not valid"),
        ({"content": json.dumps({"designs": ["x"]})}, "candidates"),
        ({"content": json.dumps({"candidates": [{"design": ""}]})}, "candidates.0.design"),
        ({"refusal": "I can't help with that."}, "refusal"),
        ({"content": ""}, "refusal or empty"),
    ],
)
def test_invalid_replies_are_sent_back_with_the_error(bad: dict[str, object], fragment: str) -> None:
    with FakeOpenAI([bad, {"content": GOOD}]) as fake:
        out = reasoner(fake.url).structured(MSG, ProposeOut)
    assert len(out.candidates) == 1
    retry = fake.requests[1]["messages"]
    assert retry[-1]["role"] == "user" and "Your reply was not valid" in retry[-1]["content"] and fragment in retry[-1]["content"]


def test_gives_up_after_attempts() -> None:
    with FakeOpenAI(default={"content": "no json here"}) as fake, pytest.raises(LLMReplyError, match="after 3 attempts"):
        reasoner(fake.url).structured(MSG, ProposeOut)
    assert len(fake.requests) == 3


@pytest.mark.parametrize("failure", [{"status": 429}, {"status": 500}, {"status": 503}, {"raw": "<html>bad gateway</html>"}])
def test_transient_failures_are_retried_with_backoff(failure: dict[str, object]) -> None:
    with FakeOpenAI([failure, failure, {"content": GOOD}]) as fake:
        out = reasoner(fake.url).structured(MSG, ProposeOut)
    assert len(out.candidates) == 1 and len(fake.requests) == 3


def test_timeout_is_retried() -> None:
    late = json.dumps({"candidates": [{"design": "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|", "rationale": "late"}]})
    with FakeOpenAI([{"delay": 1.5, "content": late}, {"content": GOOD}]) as fake:
        out = reasoner(fake.url, timeout_s=0.5).structured(MSG, ProposeOut)
    # a client that ignored the timeout would have waited for the late reply: one request, rationale "late"
    assert len(fake.requests) == 2 and out.candidates[0].rationale == "r"


def test_unauthorized_fails_fast_with_a_fix() -> None:
    with FakeOpenAI(default={"status": 401, "message": "bad key"}) as fake, pytest.raises(LLMUnavailableError, match="OPENAI_API_KEY"):
        reasoner(fake.url).structured(MSG, ProposeOut)
    assert len(fake.requests) == 1


def test_endpoint_down_stops_with_resume_hint() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LLMUnavailableError, match="rerun the same command to resume"):
        reasoner(f"http://127.0.0.1:{port}/v1", transport_retries=1).structured(MSG, ProposeOut)


def test_extract_json() -> None:
    assert json.loads(extract_json('Sure! ```json\n{"a": 1}\n``` done')) == {"a": 1}
    assert json.loads(extract_json('Here: {"a": {"b": 2}} thanks')) == {"a": {"b": 2}}


def test_make_reasoner_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COEVO_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("COEVO_LLM_MODEL", raising=False)
    assert make_reasoner().label == "offline (no LLM)"
    with pytest.raises(UserInputError, match="COEVO_LLM_BASE_URL"):
        make_reasoner("llm")
    monkeypatch.setenv("COEVO_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("COEVO_LLM_MODEL", "m")
    assert make_reasoner(storage="sqlite:///:memory:").label == "llm:m"


# ---- whole searches


def _search(url: str, storage: str, study: str, budget: int = 44, **kw: object) -> object:
    # screen llm: every paid proposal is the model's (the default, screen on, mixes in the engine's own)
    proposer = make_pelnas("pelnas", reasoner=reasoner(url, storage, **kw), screen="llm")
    return run_search(NB201Problem(dataset="cifar10", device="fpga"), proposer, budget=budget, seed=0, storage=storage, study_name=study)


def test_llm_search_records_rationale_heuristics_and_tokens(storage: str) -> None:
    with FakeOpenAI(default=nb201_model.reply) as fake:
        result = _search(fake.url, storage, "a")
    assert result.evaluations == 44  # type: ignore[attr-defined]
    assert result.reasoner == "llm:fake-7b"  # type: ignore[attr-defined]
    usage = result.llm_usage  # type: ignore[attr-defined]
    assert usage["calls"] == len(fake.requests) > 0 and usage["prompt_tokens"] > 0
    study = optuna.load_study(study_name="a", storage=storage)
    guided = [t for t in study.trials if t.user_attrs["round"] > 0]
    assert guided and all(
        t.user_attrs["reasoner"] == "llm:fake-7b" and t.user_attrs["rationale"].startswith("Keeps the niche") for t in guided
    )
    assert any(t.user_attrs["heuristics"] for t in guided)  # cited heuristic ids reach the study
    h = KnowledgeStore.for_storage(storage).load("a").heuristics["H1"]
    assert h.author == "fake-7b" and 99999 not in h.support  # invented trial numbers are dropped
    logs = list(read_round_logs(storage, study).values())
    assert all(v["reasoner"] == "llm:fake-7b" for v in logs) and any(v["usage"]["calls"] for v in logs)
    assert sum(v["usage_round"]["calls"] for v in logs) == usage["calls"]  # per-round usage adds up to the run's


@pytest.mark.slow  # 10 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_replies_are_cached_per_study(storage: str) -> None:
    with FakeOpenAI(default=nb201_model.reply) as fake:
        _search(fake.url, storage, "first")
        paid = len(fake.requests)
        other = _search(fake.url, storage, "second")  # same seed, same prompts, another study: it pays for its own
        assert len(fake.requests) == 2 * paid
        assert other.llm_usage["calls"] == paid and other.llm_usage["cached_calls"] == 0  # type: ignore[attr-defined]
    cache = ResponseCache(storage)
    assert cache.delete("first") == paid and len(cache) == paid  # each study's replies are its own rows


def test_bad_designs_and_duplicates_are_fed_back(storage: str) -> None:
    state = {"n": 0}

    def sloppy(request: dict[str, object]) -> dict[str, object]:
        state["n"] += 1
        first = next(m["content"] for m in request["messages"] if m["role"] == "user")  # type: ignore[index, union-attr]
        if "Propose" in first and state["n"] % 2 == 0:
            bad = [
                {"design": "|conv9x9~0|+|none~0|none~1|+|none~0|none~1|none~2|"},
                {"design": "|avg_pool_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|"},
            ]  # may be outside the niche
            return {"content": json.dumps({"candidates": bad})}
        return nb201_model.reply(request)  # type: ignore[arg-type]

    with FakeOpenAI(default=sloppy) as fake:
        result = _search(fake.url, storage, "s")
    assert result.evaluations == 44  # type: ignore[attr-defined]
    feedback = [p for p in fake.user_prompts() if "Some earlier candidates were rejected" in p]
    assert feedback and any("not a valid design" in p for p in feedback)


def test_endpoint_dies_mid_run_then_resume_without_repeating(storage: str) -> None:
    calls = {"n": 0}

    def flaky(request: dict[str, object]) -> dict[str, object]:
        calls["n"] += 1
        return nb201_model.reply(request) if calls["n"] <= 5 else {"status": 500}  # type: ignore[arg-type]

    with FakeOpenAI(default=flaky) as fake, pytest.raises(CoevoError, match="rerun the same command"):
        _search(fake.url, storage, "r", transport_retries=1)
    done = len([t for t in optuna.load_study(study_name="r", storage=storage).trials if t.state.name == "COMPLETE"])
    assert 0 < done < 44
    with FakeOpenAI(default=nb201_model.reply) as healthy:
        result = _search(healthy.url, storage, "r")
    assert result.evaluations == 44  # type: ignore[attr-defined]
    ids = [t.user_attrs["point_id"] for t in optuna.load_study(study_name="r", storage=storage).trials if t.state.name == "COMPLETE"]
    assert len(ids) == len(set(ids)) == 44
    first_prompts = {json.dumps(r["messages"]) for r in fake.requests[:5]}
    assert not first_prompts & {json.dumps(r["messages"]) for r in healthy.requests}  # paid calls were replayed from cache


def test_a_model_that_only_repeats_itself_stops_after_three_empty_rounds(storage: str) -> None:
    stuck = json.dumps({"candidates": [{"design": "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|", "rationale": "again"}]})
    with FakeOpenAI(default={"content": stuck}) as fake, pytest.raises(CoevoError, match="3 rounds in a row"):
        _search(fake.url, storage, "stuck", budget=60)
    study = optuna.load_study(study_name="stuck", storage=storage)
    logs = list(read_round_logs(storage, study).values())
    fallbacks = [log for log in logs if "fallback" in log]
    assert len(fallbacks) == 2  # two rounds fell back to one sampler point each, logged; the third stopped the run
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    from_llm = [t for t in done if t.user_attrs.get("rationale") == "again"]  # the all-none cell, once, if new
    # the start (a third of the budget of 60: search.proposers.start_quota), the LLM's cell, the two fallbacks
    assert len(done) == 20 + len(from_llm) + 2 and len(from_llm) <= 1


def test_review_report_of_an_llm_search_shows_tokens_per_round(storage: str, tmp_path: Path) -> None:
    with FakeOpenAI(default=nb201_model.reply) as fake:
        _search(fake.url, storage, "a", price_per_mtok=(0.15, 0.60))
    out = tmp_path / "report"
    write_report(storage, "a", out)
    md = (out / "report.md").read_text()
    assert "Reasoner: llm:fake-7b." in md and "no LLM was called" not in md
    assert "| round | calls | cached | prompt tokens | completion tokens | cost (USD) |" in md
    total = next(line for line in md.splitlines() if line.startswith("| total |"))
    calls = int(total.split("|")[2])
    assert calls == len(fake.requests) and float(total.split("|")[6]) > 0
    assert (out / "llm_usage.png").read_bytes()[:4] == b"\x89PNG"
    assert "fake-7b" in md  # LLM-authored heuristics are labelled with their model


def test_the_endpoint_is_checked_before_a_search() -> None:
    with FakeOpenAI(models=["other", "fake-7b"]) as listed:
        assert "serves fake-7b" in reasoner(listed.url).check_endpoint()
    assert listed.model_requests == 1 and not listed.requests  # the models list sufficed: no completion was paid
    with FakeOpenAI([{"content": "p"}], models=None) as unlisted:  # a server without GET /models
        assert "1-token request" in reasoner(unlisted.url).check_endpoint()
    assert len(unlisted.requests) == 1 and unlisted.requests[0]["max_tokens"] == 1
    with FakeOpenAI([{"status": 401}], models=None) as refusing, pytest.raises(LLMUnavailableError, match="API key"):
        reasoner(refusing.url).check_endpoint()
    with FakeOpenAI([{"status": 404}], models=["other"]) as missing, pytest.raises(LLMUnavailableError, match="does not serve model"):
        reasoner(missing.url).check_endpoint()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    with pytest.raises(LLMUnavailableError, match="cannot reach"):
        reasoner(f"http://127.0.0.1:{port}/v1").check_endpoint()


def test_a_worker_rebuilds_the_studys_llm_reasoner_without_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from coevo.agent.reasoners import reasoner_from_config

    monkeypatch.delenv("COEVO_LLM_BASE_URL", raising=False)
    original = reasoner("http://127.0.0.1:1/v1", price_per_mtok=(0.5, 1.5))
    config = original.config()
    assert "key" not in json.dumps(config).lower()  # secrets stay in the environment
    again = reasoner_from_config(config, storage=None, api_key="k")
    assert isinstance(again, LLMReasoner) and again.config() == config
    moved = reasoner_from_config(config, storage=None, base_url="http://127.0.0.1:2/v1")  # this machine reaches it elsewhere
    assert moved.config()["base_url"] == "http://127.0.0.1:2/v1" and moved.config()["model"] == "fake-7b"
    with pytest.raises(UserInputError, match="cannot join it with --llm-model other"):
        reasoner_from_config(config, storage=None, model="other")
