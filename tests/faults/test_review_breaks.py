"""Breaks found by an adversarial review of issue 28's chat confinement and LLM limits, each fixed.

An endpoint that compresses its reply anyway or redirects it elsewhere, a SQLite path with ``..``
through a symlink, a NUL byte in a path, a pipeline model file named with a malformed attribute,
a lone surrogate from the model, and ``kb import`` lines whose numbers or text the store cannot
hold. Each test reproduces the break and checks the fixed behaviour.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from coevo.agent.cli import main
from coevo.agent.reasoners.llm import LLMReasoner, LLMUnavailableError, ProposeOut
from coevo.knowledge.store import KnowledgeStore
from coevo.search.storage import sqlite_target
from coevo.tools import REGISTRY, CallPolicy, OutsideWorkspaceError, StorageNotAllowedError, ToolDeclinedError, call_tool
from coevo.tools._base import names_code
from tests.fakes.openai_server import FakeOpenAI

MSG = [{"role": "user", "content": "propose"}]
GOOD = json.dumps({"candidates": [{"design": "|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|", "rationale": "r"}]})


@pytest.fixture(autouse=True)
def _no_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("COEVO_LLM_BASE_URL", "COEVO_LLM_MODEL", "OPENAI_API_KEY", "COEVO_WORKSPACE", "COEVO_IMPORT_TIME_LIMIT_S"):
        monkeypatch.delenv(var, raising=False)


def completion(content: str) -> bytes:
    reply = {
        "id": "chatcmpl-raw",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-7b",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return json.dumps(reply).encode()


def response(status: str, body: bytes, headers: dict[str, str]) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Content-Length": str(len(body)), "Connection": "close", **headers}.items())
    return f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body


@contextmanager
def raw_server(answer: Callable[[str], bytes]) -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server writing ``answer(path)`` (a whole HTTP response) to every request; yields its /v1 URL and the paths asked."""
    srv = socket.create_server(("127.0.0.1", 0))
    paths: list[str] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return  # closed
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536) or b"\r\n\r\n"
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")), 0)
                while len(rest) < length:
                    rest += conn.recv(65536) or b"x" * length
                path = head.split(b" ")[1].decode()
                paths.append(path)
                with contextlib.suppress(OSError):  # the client hung up (its cap)
                    conn.sendall(answer(path))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}/v1", paths
    finally:
        srv.close()


def reasoner(url: str, **kw: Any) -> LLMReasoner:
    return LLMReasoner(model="fake-7b", base_url=url, transport_retries=0, backoff_s=0.01, timeout_s=20.0, **kw)


# ---------------------------------------------------------------- the LLM endpoint


def test_a_compressed_reply_is_capped_on_its_decoded_size() -> None:
    bomb = gzip.compress(completion("x" * 5_000_000))  # about 5 kB on the wire
    gzipped = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    too_long = pytest.raises(LLMUnavailableError, match="sent a reply longer than 65536 bytes, cut off there")
    with raw_server(lambda path: response("200 OK", bomb, gzipped)) as (url, _), too_long:
        reasoner(url, max_reply_bytes=65_536).complete(MSG)  # before the fix: 5 MB read (a 1 MiB body held 1 GB)
    small = gzip.compress(completion(GOOD))
    with raw_server(lambda path: response("200 OK", small, gzipped)) as (url, _):
        assert reasoner(url, max_reply_bytes=65_536).structured(MSG, ProposeOut).candidates[0].rationale == "r"  # decoded, once
    packed = response("200 OK", b"\x8b\x00", {"Content-Type": "application/json", "Content-Encoding": "br"})
    refused = pytest.raises(LLMUnavailableError, match="sent a reply compressed as 'br' although none was asked for")
    with raw_server(lambda path: packed) as (url, _), refused:
        reasoner(url).complete(MSG)


def test_a_redirect_is_not_followed_and_says_where_it_pointed() -> None:
    with raw_server(lambda path: response("200 OK", completion(GOOD), {"Content-Type": "application/json"})) as (elsewhere, asked):
        target = f"{elsewhere}/chat/completions"
        moved = response("307 Temporary Redirect", b"", {"Location": target})
        with raw_server(lambda path: moved) as (url, _), pytest.raises(LLMUnavailableError) as exc:
            reasoner(url).complete(MSG)
    assert f"redirected the request (HTTP 307) to {target}; LLM requests follow no redirect" in str(exc.value)
    assert asked == []  # before the fix: the prompt went to the other server, and a redirect's own body was read uncapped


# ---------------------------------------------------------------- storages and paths


def test_dotdot_through_a_symlink_is_checked_on_the_file_sqlalchemy_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "exp" / "sub").mkdir(parents=True)
    (tmp_path / "runs" / "latest").symlink_to("exp/sub")  # a user's "latest run" link, inside the workspace
    url = "sqlite:///runs/latest/../../outside.sqlite3"  # the OS reads runs/outside.sqlite3; SQLAlchemy opens ./outside.sqlite3
    assert sqlite_target(url) == Path("outside.sqlite3")
    policy = CallPolicy.model(tmp_path / "runs", lambda tool, args: True, storage="sqlite:///runs/coevo.sqlite3")
    args = {"problem": "nb201", "budget": 2, "proposer": "random", "study": "x", "storage": url}
    with pytest.raises(StorageNotAllowedError, match=f"it opens '{tmp_path / 'outside.sqlite3'}'"):
        call_tool(REGISTRY.get("search.run"), args, policy=policy)
    assert not (tmp_path / "outside.sqlite3").exists()  # before the fix the search ran and created it outside the workspace


def test_a_nul_byte_in_a_path_is_one_refusal_not_a_crash(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = CallPolicy.model(ws, lambda tool, args: True, storage=f"sqlite:///{ws / 's.sqlite3'}")
    listing = REGISTRY.get("studies.list")
    # SQLite ignores a URI path after %00: this opens the file outside, whatever follows
    with pytest.raises(StorageNotAllowedError, match=f"it opens '{tmp_path / 'out.db'}'"):
        call_tool(listing, {"storage": f"sqlite:///file:{tmp_path}/out.db%00/../ws/in.db?mode=rwc&uri=true"}, policy=policy)
    assert call_tool(listing, {"storage": f"sqlite:///file:{ws}/in.db%00/../../out.db?uri=true"}, policy=policy).value["studies"] == []
    assert not (tmp_path / "out.db").exists() and not (ws / "in.db").exists()
    # before the fix each of these was ValueError: embedded null byte, out of the tool call and the chat turn
    with pytest.raises(StorageNotAllowedError, match="holds a NUL byte"):
        call_tool(listing, {"storage": f"sqlite:///{ws}/a%00b.db"}, policy=policy)
    with pytest.raises(OutsideWorkspaceError, match="holds a NUL byte"):
        call_tool(REGISTRY.get("noc.plot"), {"out": f"{ws}/a\x00.png"}, policy=policy)


# ---------------------------------------------------------------- code


def test_a_pipeline_model_file_with_a_malformed_attribute_asks_first(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    asked: list[str] = []
    policy = CallPolicy.model(tmp_path, lambda tool, args: asked.append(tool.name) is not None, storage=f"sqlite:///{tmp_path}/s.db")
    for model in (f"{evil}:1", f"{evil}:", f"{evil}:make me"):  # pipeline's loader imports any existing file before the last ':'
        assert names_code(model)
        with pytest.raises(ToolDeclinedError, match="loads your code"):
            call_tool(REGISTRY.get("search.run"), {"problem": "pipeline", "options": {"model": model}, "budget": 1}, policy=policy)
        assert asked == ["search.run"] and not marker.exists()  # declined: before the fix imported without asking
        asked.clear()
    with pytest.raises(ToolDeclinedError, match="loads your code"):
        call_tool(REGISTRY.get("pipeline.profile"), {"model": f"{evil}:1"}, policy=policy)
    assert asked == ["pipeline.profile"] and not marker.exists()
    assert not names_code("postgresql://u@h:5432/db") and not names_code(f"{tmp_path}/missing.txt:1")


# ---------------------------------------------------------------- what the model says


@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
def test_a_lone_surrogate_from_the_model_is_replaced_not_a_crash(capfd: pytest.CaptureFixture[str], storage: str, json_out: bool) -> None:
    calls = [{"name": "kb_list", "arguments": {"study": "x\ud800"}}, {"name": "no\ud800pe", "arguments": {}}]
    script = [{"tool_calls": calls}, {"content": "the answer \ud800 here"}]
    with FakeOpenAI(script) as fake:
        capfd.readouterr()
        args = ["chat", "--storage", storage, "--once", "go", "--llm-base-url", fake.url, "--llm-model", "m"]
        code = main([*args, "--json"] if json_out else args)
        out, err = capfd.readouterr()
    assert code == 0 and "Traceback" not in err, err  # before the fix: UnicodeEncodeError out of the session store
    assert "the answer \ufffd here" in (json.loads(out)["value"]["answer"] if json_out else out)
    observations = [m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    assert observations[0].startswith("error:") and "there is no tool named 'no\ufffdpe'" in observations[1]
    if json_out:
        assert json.loads(out)["value"]["tool_calls"][0]["args"] == {"study": "x\ufffd"}


def test_a_reasoner_reply_with_a_lone_surrogate_is_cached(storage: str) -> None:
    with FakeOpenAI(default={"content": "odd \ud800 reply"}) as fake:
        text = reasoner(fake.url).complete(MSG, study="s", storage=storage)  # before the fix: UnicodeEncodeError from the cache
        assert text == "odd \ufffd reply" and reasoner(fake.url).complete(MSG, study="s", storage=storage) == text
    assert len(fake.requests) == 1  # the second came from the study's cache


# ---------------------------------------------------------------- kb import of lines the store cannot hold

HEURISTIC = {"key": "k", "text": "a claim", "scope": {}, "confidence": 0.5, "status": "proposed", "author": "me"}
EVIDENCE = {"study": "s", "trial": 1, "kind": "support", "source": "record", "effect": 1.0}


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (json.dumps(HEURISTIC)[:-1] + ', "structured": {"n": ' + "9" * 5000 + "}}", "Exceeds the limit (4300 digits)"),
        (json.dumps({**HEURISTIC, "text": "a \ud800 claim"}), "a string holds a lone surrogate ('\\ud800'), which is not text"),
        (json.dumps({**HEURISTIC, "evidence": [{**EVIDENCE, "trial": 10**30}]}), "evidence[0] needs study (str), trial (int, 0 or more)"),
        (json.dumps({**HEURISTIC, "evidence": [{**EVIDENCE, "effect": 10**400}]}), "evidence[0] needs"),
        (json.dumps({**HEURISTIC, "confidence": 10**400}), "is outside 0..1"),
        (json.dumps({**HEURISTIC, "evidence": [{**EVIDENCE, "effect": float("nan")}]}), "NaN is not a JSON number"),
        (json.dumps(HEURISTIC).replace('"confidence": 0.5', '"confidence": 1e999'), "number '1e999' is too large"),
    ],
    ids=["5000-digit-int", "lone-surrogate", "huge-trial", "huge-effect", "huge-confidence", "nan", "1e999"],
)
def test_kb_import_of_a_value_the_store_cannot_hold_is_a_bad_line(
    line: str, says: str, storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps({**HEURISTIC, "key": "good"}) + "\n" + line + "\n")
    assert main(["kb", "import", str(path), "--storage", storage, "--study", "imp"]) == 2  # before: a traceback, or NaN stored
    err = capsys.readouterr().err
    assert "Traceback" not in err and "1 bad line(s), nothing imported" in err and "line 2: " in err and says in err
    assert not KnowledgeStore.for_storage(storage).exists("imp")
