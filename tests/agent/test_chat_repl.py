"""The real ``coevo chat`` REPL driven through a pseudo-terminal (pexpect), in both modes."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import pexpect
import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import coevo_env, wait_until

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"
PROMPT = "coevo>"


def _spawn(tmp_path: Path, *extra: str, llm_url: str | None = None) -> pexpect.spawn:
    env = {k: v for k, v in coevo_env().items() if not k.startswith(("COEVO_LLM", "OPENAI_API_KEY"))}
    env.update(PROMPT_TOOLKIT_NO_CPR="1", HOME=str(tmp_path), LANG="C.UTF-8", PYTHONIOENCODING="utf-8", COLUMNS="160", TERM="xterm")
    if llm_url:
        env.update(COEVO_LLM_BASE_URL=llm_url, COEVO_LLM_MODEL="fake-chat")
    storage = f"sqlite:///{tmp_path / 'chat.sqlite3'}"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "coevo.agent.cli", "chat", "--storage", storage, *extra],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=30,
        dimensions=(50, 160),
        # a test run started as a background job ignores SIGINT, and the child would inherit that:
        # give it the default disposition, so its Python turns Ctrl-C into KeyboardInterrupt
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    return child


def test_command_mode_without_an_endpoint(tmp_path: Path) -> None:
    child = _spawn(tmp_path)
    child.expect("no LLM endpoint configured: command mode")
    child.expect("Ollama")  # says how to configure one
    child.expect(PROMPT)
    child.sendline("/tools")
    child.expect("nb201.pareto_front")
    child.expect(PROMPT)
    child.sendline(f'/run nb201.query {{"arch": "{ARCH}", "dataset": "cifar10", "device": "fpga"}}')
    child.expect("94.36")
    child.expect(PROMPT)
    child.sendline("/run nb201.query {oops")
    child.expect("not valid JSON")
    child.expect(PROMPT)
    child.sendline("/frobnicate")
    child.expect("unknown command /frobnicate")
    child.expect(PROMPT)
    # the user's own /run of a tool that changes stored data asks too (it ran without a word before)
    child.sendline('/run kb.review {"study": "none-yet", "id": "H1", "decision": "retired", "why": "out of date"}')
    child.expect("kb.review.*changes stored data or starts work")
    child.expect("run it\\? \\[y/N\\]")
    child.sendline("n")
    child.expect("did not run: it asks first")
    child.expect(PROMPT)
    child.sendline("which cells beat 93%?")
    child.expect("no LLM endpoint configured")
    child.expect(PROMPT)
    child.sendline("help")  # without the slash: in command mode no model would read it, so it is /help
    child.expect("/runs")
    child.expect(PROMPT)
    child.sendline("quit")  # as in Python's REPL
    child.expect("resume with `coevo chat --session S1`")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    # the session was stored and can be resumed
    again = _spawn(tmp_path, "--session", "S1")
    again.expect("resuming S1")
    again.expect("/frobnicate")
    again.expect(PROMPT)
    again.sendeof()
    again.expect(pexpect.EOF)


def test_llm_mode_streams_shows_tools_asks_and_survives_ctrl_c(tmp_path: Path) -> None:
    script = [
        {"tool_calls": [{"name": "nb201_query", "arguments": {"arch": ARCH, "dataset": "cifar10", "device": "fpga"}}]},
        {"content": "Trial-free lookup: this cell reaches 94.36 % at 7.42 ms."},
        {"tool_calls": [{"name": "search_start", "arguments": {"options": {"device": "pixel3"}, "budget": 50}}]},
        {"content": "Understood, no search."},
        {"delay": 30, "content": "too late"},
    ]
    with FakeOpenAI(script, default={"content": "back again"}) as fake:
        child = _spawn(tmp_path, llm_url=fake.url)
        child.expect("model fake-chat")
        child.expect(PROMPT)
        child.sendline("how good is this cell on the fpga?")
        child.expect("→ nb201.query")
        child.expect("← nb201.query.*ok")
        child.expect("reaches 94.36 % at 7.42 ms")
        child.expect("prompt \\+ .* completion tokens")
        child.expect(PROMPT)
        child.sendline("search pixel3 for me")
        child.expect("search.start.*changes stored data or starts work")
        child.expect("run it\\? \\[y/N\\]")
        child.sendline("n")
        child.expect("Understood, no search.")
        child.expect(PROMPT)
        asked = len(fake.requests)
        child.sendline("a slow question")
        child.expect("a slow question")
        # interrupt only once the slow request is in flight: on a loaded machine a fixed sleep can
        # land before the turn starts, and the Ctrl-C is then spent at the prompt
        wait_until(lambda: len(fake.requests) > asked, 60, "the slow question to reach the endpoint", every_s=0.1)
        time.sleep(0.5)
        for _ in range(3):  # a Ctrl-C that a loaded machine delivers between two reads is sent again
            child.sendintr()
            if child.expect(["turn interrupted", pexpect.TIMEOUT], timeout=8) == 0:
                break
        else:
            raise AssertionError(f"three Ctrl-C did not interrupt the turn; the screen ends with {child.before[-300:]!r}")
        child.expect(PROMPT)
        child.sendline("/session")
        child.expect("session S1: .* events")
        child.expect(PROMPT)
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    declined = [m for m in fake.requests[3]["messages"] if m["role"] == "tool"]
    assert "declined" in declined[-1]["content"]


@pytest.mark.parametrize("session", ["S404"])
def test_unknown_session_is_one_clear_line(tmp_path: Path, session: str) -> None:
    # a storage that is not there is named, and not created for the session that is not in it
    child = _spawn(tmp_path, "--session", session)
    child.expect("no storage at .*chat.sqlite3")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2 and not (tmp_path / "chat.sqlite3").exists()
    first = _spawn(tmp_path)  # a session recorded: the storage exists now
    first.expect(PROMPT)
    first.sendline("/exit")
    first.expect(pexpect.EOF)
    child = _spawn(tmp_path, "--session", session)
    child.expect(f"no chat session '{session}'")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2


def test_bare_words_that_leave_or_ask_for_help() -> None:
    from coevo.agent.chat.repl import _bare_command

    assert _bare_command("exit", offline=False) == _bare_command(" Quit ", offline=True) == "/exit"
    assert _bare_command("help", offline=True) == "/help"
    assert _bare_command("help", offline=False) == "help"  # a model reads it
    assert _bare_command("exit the loop early?", offline=True) == "exit the loop early?"


def test_the_chat_options_name_the_tools_workspace_variable_and_the_loop_s_step_limit() -> None:
    """The chat's option module keeps its own copy of the workspace variable's name (building the parser must not load
    the tool registry): the copy must be the tools' name, and ``--max-steps``'s default the loop's."""
    import argparse
    import inspect

    from coevo import tools
    from coevo.agent.chat import options
    from coevo.agent.chat.loop import ChatAgent

    assert options.ENV_WORKSPACE == tools.ENV_WORKSPACE
    parser = argparse.ArgumentParser()
    options.add_arguments(parser)
    assert parser.parse_args([]).max_steps == inspect.signature(ChatAgent).parameters["max_steps"].default
