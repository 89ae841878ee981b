"""What a new user's walk-through of ``coevo chat`` found: each test shows one thing that was wrong and is now right."""

from __future__ import annotations

import json
from typing import Any

import pytest

from coevo.agent.chat.store import SessionStore
from coevo.agent.cli import main
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture(autouse=True)
def _no_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("COEVO_LLM_BASE_URL", "COEVO_LLM_MODEL", "OPENAI_API_KEY", "COEVO_WORKSPACE"):
        monkeypatch.delenv(var, raising=False)


def once_json(capfd: pytest.CaptureFixture[str], storage: str, text: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    """``coevo chat --storage STORAGE --once TEXT --json``: exit code, its one JSON object, and stderr."""
    capfd.readouterr()
    code = main(["chat", "--storage", storage, "--once", text, "--json", *extra])
    out, err = capfd.readouterr()
    assert out.count("\n") == 1, f"stdout is not one line: {out!r}"
    return code, json.loads(out), err


def scripted_turn(
    capfd: pytest.CaptureFixture[str], storage: str, script: list[dict[str, Any]], stream: bool
) -> tuple[str, str, dict[str, str], int]:
    """One ``coevo chat --once`` turn against a loopback model playing ``script`` (streamed or not): stdout, stderr,
    what the model was told of each tool call (by call id, from its second request), and how many requests it got."""
    with FakeOpenAI(script) as fake:
        capfd.readouterr()
        argv = ["chat", "--storage", storage, "--once", "query a cell", "--llm-base-url", fake.url, "--llm-model", "m"]
        assert main(argv + ([] if stream else ["--no-stream"])) == 0
        out, err = capfd.readouterr()
    told = {m["tool_call_id"]: m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"}
    return out, err, told, len(fake.requests)


# ---------------------------------------------------------------- 1: /exit under --once names no other session


def test_exit_under_once_without_session_names_no_stored_session(capfd: pytest.CaptureFixture[str], storage: str) -> None:
    store = SessionStore(storage)
    older = store.create(None)  # an unrelated session already stored: S1
    code, record, _ = once_json(capfd, storage, "/exit")
    assert code == 0 and record["session"] is None
    assert record["value"] == {"session": None, "resume": None}, record
    assert "nothing to resume" in record["summary"] and older not in json.dumps(record)
    # for people too: no resume hint pointing at S1
    capfd.readouterr()
    assert main(["chat", "--storage", storage, "--once", "/exit"]) == 0
    out, _ = capfd.readouterr()
    assert "nothing to resume" in out and older not in out
    # with --session the call's session is the one to resume
    code, record, _ = once_json(capfd, storage, "/exit", "--session", older)
    assert record["session"] == older and record["value"] == {"session": older, "resume": f"coevo chat --session {older}"}


# ---------------------------------------------------------------- 5: /run rounds as `coevo tools run --json` does


def test_run_under_once_json_gives_the_numbers_tools_run_json_gives(capfd: pytest.CaptureFixture[str], storage: str) -> None:
    from coevo.search.nb201 import NB201Problem
    from coevo.search.runner import run_search

    run_search(NB201Problem(dataset="cifar10", device="fpga"), "random", budget=4, storage=storage, study_name="s")
    args = json.dumps({"study": "s", "storage": storage})
    capfd.readouterr()
    assert main(["tools", "run", "study.front", "--args", args, "--json"]) == 0
    printed = json.loads(capfd.readouterr().out)
    code, record, _ = once_json(capfd, storage, f"/run study.front {args}")
    assert code == 0 and record["ok"]
    hv = record["value"]["value"]["hv_ratio"]
    assert hv == printed["value"]["hv_ratio"] == float(f"{hv:.7g}"), hv  # 7 significant digits, as the CLI prints
    assert record["value"] == printed  # every number, not only the HV ratio
    code, record, _ = once_json(capfd, storage, "/runs")
    assert main(["tools", "run", "studies.list", "--args", json.dumps({"storage": storage}), "--json"]) == 0
    listed = json.loads(capfd.readouterr().out)
    assert code == 0 and record["value"] == listed["value"]


# ---------------------------------------------------------------- 2: bad tool calls shown as made, and the model told why


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
def test_bad_tool_calls_are_shown_as_made_counted_and_explained(capfd: pytest.CaptureFixture[str], storage: str, stream: bool) -> None:
    script = [
        {"tool_calls": [{"name": "nb201_query", "arguments": "{bad"}, {"name": "nosuch_tool", "arguments": {"x": 1}}]},
        {"content": "Sorry, let me try again later."},
    ]
    out, _, told, _ = scripted_turn(capfd, storage, script, stream)
    bad, unknown = told["call_1_0"], told["call_1_1"]
    # the model is told the real problem: the JSON (streamed, LangChain completed `{bad` into `{}`: "arch: Field required")
    assert "are not valid JSON (Expecting property name" in bad and "Field required" not in bad, bad
    assert "there is no tool named 'nosuch_tool'" in unknown
    # every call shown as the model made it (the raw text of arguments that are not JSON), with its outcome
    assert "→ nb201.query {bad" in out and "← nb201.query error" in out, out
    assert '→ nosuch_tool {"x": 1}' in out and "← nosuch_tool error" in out, out
    assert out.count("→ ") == 2 and "2 tool call(s)" in out  # the footer counts what was shown


# ---------------------------------------------------------------- 3: a reply that is not JSON, named as a search names it


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
def test_a_body_that_is_not_json_is_named_with_the_endpoint_as_the_search_names_it(
    capfd: pytest.CaptureFixture[str], storage: str, stream: bool
) -> None:
    from coevo.agent.llm_client import describe_failure

    with FakeOpenAI(default={"raw": "<html>nope</html>"}) as fake:
        extra = ("--llm-base-url", fake.url, "--llm-model", "m", *(() if stream else ("--no-stream",)))
        code, record, err = once_json(capfd, storage, "hello", *extra)
    # the words of coevo search's LLM reasoner for the same failure (agent/reasoners/llm.py: where=f"the LLM endpoint {url}")
    said = describe_failure(json.JSONDecodeError("Expecting value", "<html>nope</html>", 0), f"the LLM endpoint {fake.url}")
    assert said.endswith("(JSONDecodeError: Expecting value: line 1 column 1 (char 0))")
    assert code == 2 and record["error"] == f"{said}; ask again", record["error"]
    assert "No generation chunks" not in err


# ---------------------------------------------------------------- 4: --once --json: stderr only for errors and warnings


def test_search_under_once_json_keeps_its_reasoner_and_progress_lines_in_the_json(capfd: pytest.CaptureFixture[str], storage: str) -> None:
    code, record, err = once_json(capfd, storage, "/search --problem nb201 --budget 4 --study q --json")
    assert code == 0 and record["ok"] and record["value"]["reasoner"] == "offline (no LLM)"
    assert err == "", f"stderr:\n{err}"  # docs/chat.md: under --json stderr holds only errors and warnings
    said = " ".join(record["stderr"].split())  # rich wraps the lines
    assert "reasoner: offline (no LLM)" in said and "search pelnas · 4/4" in said and "ended after" in said
    # an error still reaches stderr (and the record); the usage hint around it is the record's
    code, record, err = once_json(capfd, storage, "/search --budget")
    assert code == 2 and "error: argument --budget: expected one argument" in err and "--help" not in err, err
    assert "run 'coevo search --help'" in record["stderr"]


def test_held_stderr_passes_on_errors_and_warnings_only() -> None:
    import io

    from coevo.agent.chat.repl import HeldStderr

    stream = io.StringIO()
    held = HeldStderr(stream)
    lines = [
        "search pelnas · 1/4 · HV ratio 0.52 · 0:01 elapsed · eta 0:03\n",
        "reasoner: offline (no LLM). Set COEVO_LLM_BASE_URL and\nCOEVO_LLM_MODEL to use an LLM.\n",
        "2 of 30 paid evaluations failed (each counted once against the budget, not retried): trial 3 ...\n",
        "1 worker process(es) exited with an error; rerun the same command to finish\n",
        "x.py:3: UserWarning: careful\n",
        "LLM request failed (JSONDecodeError), attempt 1/4; retrying in 1.0 s\n",
        "coevo search: error: argument --budget: expected one argument\n",
    ]
    for line in lines:
        held.write(line)
    assert stream.getvalue() == "".join(lines[2:]) and held.text() == "".join(lines) and not held.isatty()


# ---------------------------------------------------------------- the front reads the same in chat as in coevo search


def test_front_columns_are_in_the_same_order_in_chat_and_in_coevo_search(capfd: pytest.CaptureFixture[str], storage: str) -> None:
    def header_order(text: str, names: list[str]) -> list[str]:
        header = next(line for line in text.splitlines() if all(n in line for n in names))
        return sorted(names, key=header.index)

    names = ["latency_ms", "accuracy", "point id"]
    capfd.readouterr()
    argv = ["search", "--problem", "nb201", "--proposer", "random", "--budget", "4", "--storage", storage, "--study", "s"]
    assert main(argv) == 0
    searched = header_order(capfd.readouterr().out, names)
    assert main(["chat", "--storage", storage, "--once", f"/run study.front {json.dumps({'study': 's', 'storage': storage})}"]) == 0
    chatted = header_order(capfd.readouterr().out, ["latency_ms", "accuracy", "point_id"])
    # the minimised objective first in both (chat listed the design's point id and paid before the objectives)
    assert searched == ["latency_ms", "accuracy", "point id"]
    assert chatted == ["latency_ms", "accuracy", "point_id"]


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
def test_a_tool_call_whose_arguments_are_not_an_object_is_one_bad_call_streamed_or_not(
    capfd: pytest.CaptureFixture[str], storage: str, stream: bool
) -> None:
    # without streaming, LangChain failed the whole reply (langchain-ai/langchain#35990): the model's other call and
    # its text were lost and the turn was retried as a malformed body
    script = [
        {
            "content": "Let me look.",
            "tool_calls": [{"name": "nb201_query", "arguments": "[1, 2]"}, {"name": "studies_list", "arguments": {}}],
        },
        {"content": "Done."},
    ]
    out, err, told, requests = scripted_turn(capfd, storage, script, stream)
    assert requests == 2 and "retrying" not in err, err  # one reply, read once, not asked again
    assert "valid JSON but not a JSON object (an array); nothing ran" in told["call_1_0"], told
    assert not told["call_1_1"].startswith("error"), told  # the other call of the same reply ran
    assert "→ nb201.query [1, 2]" in out and "→ studies.list" in out and "Let me look." in out, out
