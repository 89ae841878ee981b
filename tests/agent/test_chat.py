"""The chat agent loop against a loopback OpenAI-compatible server: tools, errors, sessions, commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from coevo.agent.chat.commands import CommandContext, dispatch
from coevo.agent.chat.loop import ChatAgent, ChatModelError
from coevo.agent.chat.store import SessionStore
from coevo.agent.cli import main
from coevo.agent.cli.chat import in_process
from coevo.agent.llm_client import LLMSettings, chat_model
from coevo.tools import REGISTRY
from tests.fakes.openai_server import FakeOpenAI

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"
QUERY = {"name": "nb201_query", "arguments": {"arch": ARCH, "dataset": "cifar10", "device": "fpga"}}


def _agent(fake: FakeOpenAI, storage: str, *, stream: bool = True, confirm: bool = True, timeout_s: float = 10.0, **kw: Any) -> ChatAgent:
    store = SessionStore(storage)
    return ChatAgent(
        chat_model(LLMSettings(fake.url, "fake-chat", timeout_s=timeout_s, streaming=stream)),
        REGISTRY,
        store,
        store.create("fake-chat"),
        storage=storage,
        confirm=lambda tool, args: confirm,
        stream=stream,
        **kw,
    )


def _tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
def test_the_agent_calls_the_right_tool_and_answers_from_its_result(storage: str, stream: bool) -> None:
    tokens: list[str] = []
    with FakeOpenAI([{"tool_calls": [QUERY]}, {"content": "Cell 9930 reaches 94.36 % at 7.42 ms on the FPGA."}]) as fake:
        agent = _agent(fake, storage, stream=stream, on_event=lambda kind, data: tokens.append(data.get("text", "")))
        result = agent.turn("how good is this cell on the fpga?")
    assert result.answer == "Cell 9930 reaches 94.36 % at 7.42 ms on the FPGA."
    assert result.tool_calls == [
        {"name": "nb201.query", "args": QUERY["arguments"], "ok": True, "seconds": result.tool_calls[0]["seconds"]}
    ]
    first, second = fake.requests
    assert {t["function"]["name"] for t in first["tools"]} == {t.name.replace(".", "_") for t in REGISTRY}  # one list of tools
    assert "nb201_query" in first["messages"][0]["content"] and "Never invent numbers" in first["messages"][0]["content"]
    observation = json.loads(_tool_messages(second)[0]["content"])
    assert observation["value"]["accuracy_pct"] == pytest.approx(94.36, abs=0.01)  # the real tool ran
    assert result.prompt_tokens == 200 and result.completion_tokens == 40
    assert "".join(tokens).endswith("on the FPGA.")
    kinds = [e.kind for e in agent.store.events(agent.session)]
    assert kinds == ["user", "assistant", "tool_result", "assistant"]


def test_malformed_tool_call_and_unknown_tool_go_back_as_observations(storage: str) -> None:
    script = [
        {"tool_calls": [{"name": "nb201_query", "arguments": '{"arch" ::: ]'}]},  # not JSON
        {"tool_calls": [{"name": "nb201_teleport", "arguments": {}}]},  # invented tool
        {"tool_calls": [{"name": "nb201_query", "arguments": {"arch": "|bogus~0|", "dataset": "cifar10", "device": "fpga"}}]},
        {"content": "I could not query that cell."},
    ]
    with FakeOpenAI(script) as fake:
        result = _agent(fake, storage).turn("query something")
    assert result.answer == "I could not query that cell."
    observations = [_tool_messages(r)[-1]["content"] for r in fake.requests[1:]]
    assert "are not valid JSON (Expecting" in observations[0] and "nothing ran" in observations[0]
    assert "there is no tool named 'nb201_teleport'" in observations[1] and "nb201_query" in observations[1]
    assert observations[2].startswith("error:") and "bogus" in observations[2]  # the tool's own error, actionable
    assert [c["ok"] for c in result.tool_calls] == [False, False, False]


def test_long_running_tools_need_confirmation(storage: str) -> None:
    run = {"name": "search_run", "arguments": {"budget": 5, "proposer": "random", "storage": storage}}
    with FakeOpenAI([{"tool_calls": [run]}, {"content": "OK, I will not run it."}]) as fake:
        result = _agent(fake, storage, confirm=False).turn("run a search")
    assert "the user declined to run search_run" in _tool_messages(fake.requests[1])[0]["content"]
    assert result.tool_calls[0]["ok"] is False and result.answer == "OK, I will not run it."


def test_refusal_timeout_http_errors_and_garbage_leave_the_session_alive(storage: str) -> None:
    refusal = {"refusal": "I cannot help with that."}  # twice: a streamed refusal is fetched again without streaming
    with FakeOpenAI([refusal, refusal], default={"delay": 3.0, "content": "late"}) as fake:  # CHAT_RETRY asks once more
        agent = _agent(fake, storage, timeout_s=1.0)
        result = agent.turn("something forbidden")
        assert result.refused and "I cannot help with that." in result.answer
        with pytest.raises(ChatModelError, match="did not answer in time"):
            agent.turn("slow question")
    for step, message in (
        ({"status": 401}, "refused the API key"),
        ({"status": 429}, "rate-limiting"),
        ({"status": 500}, "HTTP 500"),
        ({"raw": "<html>nope</html>"}, "not an OpenAI chat completion"),
    ):
        with FakeOpenAI(default=step) as fake, pytest.raises(ChatModelError, match=message):
            _agent(fake, storage, stream=False).turn("hello")
    with FakeOpenAI([{"content": "still here"}]) as fake:
        assert agent.__class__  # the same session continues after failures
        agent.model = _agent(fake, storage).model
        assert agent.turn("are you there?").answer == "still here"
    users = [e.content for e in agent.store.events(agent.session) if e.kind == "user"]
    assert users == ["something forbidden", "slow question", "are you there?"]  # nothing recorded was lost


def test_steps_per_turn_are_bounded(storage: str) -> None:
    with FakeOpenAI(default={"tool_calls": [QUERY]}) as fake:
        result = _agent(fake, storage, max_steps=3).turn("loop forever")
    assert len(fake.requests) == 3 and result.stopped and "3 model calls" in result.stopped


def test_a_resumed_session_sends_the_earlier_conversation(storage: str) -> None:
    with FakeOpenAI([{"tool_calls": [QUERY]}, {"content": "94.36 %"}, {"content": "7.42 ms"}]) as fake:
        agent = _agent(fake, storage)
        agent.turn("accuracy?")
        resumed = ChatAgent(agent.model, REGISTRY, SessionStore(storage), agent.session, storage=storage, confirm=lambda t, a: True)
        resumed.model = agent.model
        resumed.turn("and latency?")
    roles = [m["role"] for m in fake.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]


def test_interrupted_tool_calls_are_closed_in_history(storage: str) -> None:
    with FakeOpenAI([{"tool_calls": [QUERY]}, {"content": "fine"}]) as fake:
        agent = _agent(fake, storage)

        def interrupt(kind: str, data: dict[str, Any]) -> None:
            if kind == "tool_start":
                raise KeyboardInterrupt

        agent.on_event = interrupt
        with pytest.raises(KeyboardInterrupt):
            agent.turn("query it")
        agent.on_event = lambda kind, data: None
        assert agent.turn("go on").answer == "fine"
    tool_msgs = _tool_messages(fake.requests[-1])
    assert tool_msgs and tool_msgs[0]["content"].startswith("interrupted")


def test_commands_without_an_llm(storage: str, tmp_path: Path) -> None:
    store = SessionStore(storage)
    session = store.create(None)
    console = Console(file=(tmp_path / "out.txt").open("w"), width=200)
    ctx = CommandContext(REGISTRY, store, session, storage, console, cli=in_process(main))
    assert dispatch(ctx, "/tools").ok
    assert dispatch(ctx, f'/run nb201.query {{"arch": "{ARCH}", "dataset": "cifar10", "device": "fpga"}}').ok
    bad = dispatch(ctx, "/run nb201.query {oops")
    assert not bad.ok and "not valid JSON" in bad.summary
    assert "unknown tool" in dispatch(ctx, "/run nb201.teleport {}").summary
    assert "unknown command /frobnicate" in dispatch(ctx, "/frobnicate").summary
    assert dispatch(ctx, "/search --proposer random --budget 3 --json").ok
    assert dispatch(ctx, "/runs").ok
    assert not dispatch(ctx, "/search --budget").ok  # argparse usage error: the session stays
    assert dispatch(ctx, "/exit").exit
    console.file.close()
    text = (tmp_path / "out.txt").read_text()
    assert "94.36" in text and "nb201.pareto_front" in text
    recorded = [e for e in store.events(session) if e.kind == "command"]
    assert len(recorded) == 9 and [e.data["ok"] for e in recorded].count(False) == 4


def test_once_json_with_and_without_an_endpoint(storage: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("COEVO_LLM_BASE_URL", "COEVO_LLM_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert main(["chat", "--storage", storage, "--once", "/tools", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and "nb201.query" in [t["name"] for t in out["value"]]
    assert main(["chat", "--storage", storage, "--once", "list the tools"]) == 2
    assert "no LLM endpoint configured" in capsys.readouterr().err
    with FakeOpenAI([{"content": "There are 10 tools."}]) as fake:
        args = ["chat", "--storage", storage, "--llm-base-url", fake.url, "--llm-model", "m", "--once", "list the tools", "--json"]
        assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["value"]["answer"] == "There are 10 tools." and out["value"]["usage"]["prompt_tokens"] == 100
    assert out["session"] is None and SessionStore(storage).ids() == []  # --once without --session keeps no session
    assert main(["chat", "--storage", storage, "--session", "S99", "--once", "/tools"]) == 2
    assert "no chat session 'S99'" in capsys.readouterr().err
