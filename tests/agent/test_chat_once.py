"""Scriptable chat: ``coevo chat --once ... --json`` prints exactly one JSON object on stdout, and tools that ask first
run only with ``--yes``, whether ``/run`` or the model calls them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import optuna
import pytest

from coevo.agent.chat.store import SessionStore
from coevo.agent.cli import main
from coevo.knowledge.store import KnowledgeStore
from coevo.search.nb201 import NB201Problem
from coevo.search.runner import run_search
from coevo.tools import REGISTRY
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import wait_until

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"
STUDY = "kb-world"


@pytest.fixture(autouse=True)
def _no_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("COEVO_LLM_BASE_URL", "COEVO_LLM_MODEL", "OPENAI_API_KEY", "COEVO_WORKSPACE"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def kb_storage(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A storage holding study ``kb-world``: a small pelnas search (offline reasoner) with its knowledge base."""
    folder = tmp_path_factory.mktemp("kb")
    storage = f"sqlite:///{folder / 'study.sqlite3'}"
    run_search(NB201Problem(dataset="cifar10", device="fpga"), "pelnas", budget=30, storage=storage, study_name=STUDY)
    return storage


def once(capfd: pytest.CaptureFixture[str], storage: str, text: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    """Run ``coevo chat --once TEXT --json``; its exit code, the one JSON object on stdout, and stderr.

    Fails unless stdout is exactly one JSON object on one line (file-descriptor level, so
    nothing written around Python's ``sys.stdout`` escapes the check).
    """
    capfd.readouterr()
    code = main(["chat", "--storage", storage, "--once", text, "--json", *extra])
    out, err = capfd.readouterr()
    assert out.endswith("\n") and out.count("\n") == 1, f"stdout is not one line: {out!r}"
    record = json.loads(out)  # raises on anything but one JSON value
    assert isinstance(record, dict) and record["input"] == text
    return code, record, err


def test_runs_gives_the_studies_as_data_and_nothing_else(capfd: pytest.CaptureFixture[str], kb_storage: str) -> None:
    code, record, err = once(capfd, kb_storage, "/runs")
    assert code == 0 and record["ok"] and record["kind"] == "command"
    names = [s["study"] for s in record["value"]["studies"]]
    assert names == optuna.get_all_study_names(kb_storage) == [STUDY]
    assert err == ""  # the human-readable table (2.8 kB of it) is not printed: its data is the value


@pytest.mark.parametrize(
    "text", ["/runs", "/tools", "/help", "/session", f"/kb list --study {STUDY}", f"/kb show H1 --study {STUDY}", "/run"]
)
def test_a_command_that_succeeds_writes_nothing_on_stderr(capfd: pytest.CaptureFixture[str], kb_storage: str, text: str) -> None:
    """A --json turn is for scripts: stdout holds the one JSON object, stderr only what went wrong (here: nothing)."""
    if text == "/run":
        text = f'/run nb201.query {{"arch": "{ARCH}", "dataset": "cifar10", "device": "fpga"}}'
    code, record, err = once(capfd, kb_storage, text)
    assert code == 0 and record["ok"], record
    assert err == "", f"stderr of {text!r}:\n{err}"


def test_kb_list_json_gives_the_heuristics_as_a_list(capfd: pytest.CaptureFixture[str], kb_storage: str) -> None:
    code, record, _ = once(capfd, kb_storage, f"/kb list --study {STUDY} --json")
    assert code == 0 and record["ok"]
    kb = KnowledgeStore.for_storage(kb_storage).load(STUDY)
    assert kb.heuristics, "the fixture's search learned nothing; the test would prove nothing"
    assert {(h["id"], h["text"]) for h in record["value"]} == {(h.id, h.text) for h in kb.heuristics.values()}


def test_json_lines_commands_give_a_list_even_of_one(capfd: pytest.CaptureFixture[str], kb_storage: str) -> None:
    heuristics = KnowledgeStore.for_storage(kb_storage).load(STUDY).heuristics
    code, record, _ = once(capfd, kb_storage, f"/kb export --study {STUDY}")
    assert code == 0 and sorted(r["text"] for r in record["value"]) == sorted(h.text for h in heuristics.values())
    first = next(iter(heuristics))
    assert once(capfd, kb_storage, f"/kb accept {first} --study {STUDY}")[0] == 0
    code, record, _ = once(capfd, kb_storage, f"/kb list --study {STUDY} --status accepted --json")
    assert code == 0 and [(h["id"], h["status"]) for h in record["value"]] == [(first, "accepted")]


def test_kb_list_without_json_puts_its_table_text_in_the_value(capfd: pytest.CaptureFixture[str], kb_storage: str) -> None:
    code, record, err = once(capfd, kb_storage, f"/kb list --study {STUDY}")
    first = next(iter(KnowledgeStore.for_storage(kb_storage).load(STUDY).heuristics))
    assert code == 0 and isinstance(record["value"], str) and f"heuristics in {STUDY}" in record["value"]
    assert first in record["value"] and first not in err  # the table is the value, not a second copy on stderr


def test_search_json_gives_the_search_summary(capfd: pytest.CaptureFixture[str], storage: str) -> None:
    code, record, _ = once(capfd, storage, "/search --proposer random --budget 3 --study s3 --json")
    assert code == 0 and record["ok"]
    trials = optuna.load_study(study_name="s3", storage=storage).trials
    assert record["value"]["study"] == "s3" and record["value"]["evaluations"] == len(trials) == 3
    code, record, _ = once(capfd, storage, "/search --budget")  # argparse's usage error: one object still
    assert code == 2 and not record["ok"]


def test_tools_run_session_help_and_an_unknown_command(capfd: pytest.CaptureFixture[str], storage: str) -> None:
    code, record, _ = once(capfd, storage, "/tools")
    assert code == 0 and [t["name"] for t in record["value"]] == REGISTRY.names()
    asks = {t["name"] for t in record["value"] if t["long_running"] or t["confirm"]}
    assert {"search.start", "search.run", "kb.review"} <= asks and "nb201.query" not in asks

    code, record, _ = once(capfd, storage, f'/run nb201.query {{"arch": "{ARCH}", "dataset": "cifar10", "device": "fpga"}}')
    assert code == 0 and record["ok"] and set(record["value"]) == {"value", "messages"}
    assert record["value"]["value"]["accuracy_pct"] == pytest.approx(94.36, abs=0.01)

    code, record, _ = once(capfd, storage, "/session")
    # without --session the call's session is not kept: nothing before /session in it (the line itself is recorded after)
    assert code == 0 and record["session"] is None and record["value"]["session"] is None and record["value"]["events"] == 0

    code, record, _ = once(capfd, storage, "/help")
    assert code == 0 and "/run" in [c["command"] for c in record["value"]["commands"]]

    code, record, err = once(capfd, storage, "/frobnicate")
    assert code == 2 and not record["ok"] and "unknown command /frobnicate" in record["summary"]
    assert "/help" in record["value"]["commands"] and "unknown command" in err


def test_an_llm_turn_gives_answer_tool_calls_and_tokens(capfd: pytest.CaptureFixture[str], storage: str) -> None:
    query = {"name": "nb201_query", "arguments": {"arch": ARCH, "dataset": "cifar10", "device": "fpga"}}
    with FakeOpenAI([{"tool_calls": [query]}, {"content": "94.36 % at 7.42 ms.", "prompt_tokens": 300}]) as fake:
        code, record, _ = once(capfd, storage, "how good is it?", "--llm-base-url", fake.url, "--llm-model", "m")
    assert code == 0 and record["ok"] and record["kind"] == "turn"
    value = record["value"]
    assert value["answer"] == "94.36 % at 7.42 ms."
    assert [(c["name"], c["ok"]) for c in value["tool_calls"]] == [("nb201.query", True)]
    assert value["usage"]["prompt_tokens"] == 100 + 300 and value["usage"]["completion_tokens"] == 40


def test_once_leaves_no_session_behind_and_records_into_a_named_one(capfd: pytest.CaptureFixture[str], storage: str) -> None:
    store = SessionStore(storage)
    for text in ("/tools", "/runs", "/session", "/frobnicate"):
        once(capfd, storage, text)
    assert store.ids() == []  # four calls, no session in the study database
    session = store.create(None)
    code, record, _ = once(capfd, storage, "/tools", "--session", session)
    assert code == 0 and record["session"] == session and store.ids() == [session]
    code, record, _ = once(capfd, storage, "/session", "--session", session)
    assert record["value"]["session"] == session and record["value"]["events"] == 1  # the /tools line before it
    assert [e.content for e in store.events(session) if e.kind == "command"] == ["/tools", "/session"]


def test_failures_still_print_one_object(capfd: pytest.CaptureFixture[str], storage: str) -> None:
    code, record, err = once(capfd, storage, "a question without an endpoint")
    assert code == 2 and not record["ok"] and "no LLM endpoint configured" in record["summary"] and "error:" in err
    code, record, _ = once(capfd, storage, "/tools", "--session", "S99")
    # the storage is not there yet (--once without --session keeps nothing): named, not created for S99
    assert code == 2 and record["session"] is None and "no storage at" in record["summary"] and not Path(storage[10:]).exists()
    from coevo.agent.chat.store import SessionStore

    SessionStore(storage).create(None)  # a session recorded there: the storage exists now
    code, record, _ = once(capfd, storage, "/tools", "--session", "S99")
    assert code == 2 and record["session"] is None and "no chat session 'S99'" in record["summary"]
    with FakeOpenAI(default={"status": 500}) as fake:
        code, record, _ = once(capfd, storage, "hello", "--llm-base-url", fake.url, "--llm-model", "m", "--no-stream")
    assert code == 2 and not record["ok"] and "HTTP 500" in record["summary"]
    # a /kb or /search command that fails says why in the record too, not only its exit status
    code, record, err = once(capfd, storage, "/kb frob")
    assert code == 2 and "invalid choice: 'frob'" in record["summary"] and "invalid choice" in err


# ---------------------------------------------------------------- tools that ask first


def _start_args(storage: str, study: str) -> dict[str, Any]:
    return {"proposer": "random", "budget": 3, "options": {"device": "raspi4"}, "storage": storage, "study": study}


def _started_nothing(storage: str, study: str) -> None:
    assert not Path("runs/jobs").exists(), "a background search was started"
    assert study not in optuna.get_all_study_names(storage)


def _wait_for(pid: int, storage: str, study: str) -> None:
    """Reap the background search (a child of this test process) and check it did its work."""

    def reaped() -> tuple[int] | None:
        done, status = os.waitpid(pid, os.WNOHANG)
        return (os.waitstatus_to_exitcode(status),) if done else None

    try:
        (code,) = wait_until(reaped, 120, "the background search to finish")
    except AssertionError:
        os.kill(pid, 9)
        raise
    assert code == 0
    assert len(optuna.load_study(study_name=study, storage=storage).trials) == 3


def test_run_of_a_tool_that_asks_first_needs_yes(capfd: pytest.CaptureFixture[str], storage: str) -> None:
    line = f"/run search.start {json.dumps(_start_args(storage, 'bg'))}"
    code, record, _ = once(capfd, storage, line)
    assert code == 2 and not record["ok"] and "--yes" in record["summary"]
    _started_nothing(storage, "bg")
    code, record, _ = once(capfd, storage, line, "--yes")
    assert code == 0 and record["ok"]
    _wait_for(record["value"]["value"]["pid"], storage, "bg")


def test_a_models_call_to_a_tool_that_asks_first_needs_yes(capfd: pytest.CaptureFixture[str], storage: str) -> None:
    call = {"tool_calls": [{"name": "search_start", "arguments": _start_args(storage, "bg-model")}]}
    with FakeOpenAI([call, {"content": "Not started."}]) as fake:
        code, record, _ = once(capfd, storage, "search raspi4", "--llm-base-url", fake.url, "--llm-model", "m")
    observation = next(m for m in fake.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert code == 0 and record["value"]["tool_calls"][0]["ok"] is False
    assert observation.startswith("the user declined to run search_start")
    _started_nothing(storage, "bg-model")
    with FakeOpenAI([call, {"content": "Started."}]) as fake:
        code, record, _ = once(capfd, storage, "search raspi4", "--llm-base-url", fake.url, "--llm-model", "m", "--yes")
    observation = next(m for m in fake.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert code == 0 and record["value"]["tool_calls"][0]["ok"] is True
    _wait_for(json.loads(observation)["value"]["pid"], storage, "bg-model")


def test_a_models_call_that_loads_user_code_needs_yes_the_users_run_does_not(
    capfd: pytest.CaptureFixture[str], storage: str, tmp_path: Path
) -> None:
    source = tmp_path / "mine.py"
    source.write_text("from pathlib import Path\nPath(__file__).with_suffix('.imported').write_text('ran')\n")
    marker = tmp_path / "mine.imported"
    args = {"model": f"{source}:build", "resolution": 4}
    call = {"tool_calls": [{"name": "pipeline_profile", "arguments": args}]}
    with FakeOpenAI([call, {"content": "declined"}]) as fake:
        code, record, _ = once(capfd, storage, "profile my model", "--llm-base-url", fake.url, "--llm-model", "m")
    assert code == 0 and record["value"]["tool_calls"][0]["ok"] is False and not marker.exists()
    with FakeOpenAI([call, {"content": "loaded"}]) as fake:
        once(capfd, storage, "profile my model", "--llm-base-url", fake.url, "--llm-model", "m", "--yes")
    assert marker.exists()  # imported after the yes (the file builds no model, so the tool then reports an error)
    marker.unlink()
    code, record, _ = once(capfd, storage, f"/run pipeline.profile {json.dumps(args)}")
    assert marker.exists() and "no function 'build'" in record["summary"]  # the user's own /run: no question asked


def test_a_models_write_outside_the_workspace_is_refused_with_a_message(
    capfd: pytest.CaptureFixture[str], storage: str, tmp_path: Path
) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()  # coevo chat refuses a --workspace that is no folder
    out = tmp_path / "curve.png"  # outside --workspace inner, inside the storage's folder
    plot = {"topology": "benes", "n": 8, "routings": ["adaptive"], "loads": [0.1], "cycles": 200, "out": str(out)}
    llm = ["--llm-base-url", "", "--llm-model", "m", "--yes"]
    with FakeOpenAI([{"tool_calls": [{"name": "noc_plot", "arguments": plot}]}, {"content": "refused"}]) as fake:
        llm[1] = fake.url
        once(capfd, storage, "plot", *llm, "--workspace", str(inner))
    observation = next(m for m in fake.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert observation.startswith("error:") and "may write only under the workspace" in observation and str(inner) in observation
    assert not out.exists()
    with FakeOpenAI([{"tool_calls": [{"name": "noc_plot", "arguments": plot}]}, {"content": "drawn"}]) as fake:
        llm[1] = fake.url
        _, record, _ = once(capfd, storage, "plot", *llm)  # default workspace: the storage's folder
    assert record["value"]["tool_calls"][0]["ok"] and out.read_bytes()[:4] == b"\x89PNG"
