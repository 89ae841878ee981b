"""Faults at the LLM endpoint and in knowledge-base files: every one ends within a bound, with a clear note, and loses nothing.

The endpoint is the loopback OpenAI-compatible server (:mod:`tests.fakes.openai_server`),
reached through the real client stack: one that drips its answer one byte at a time (every
read succeeds, so only a deadline on the whole request ends it), one that sends a body far
larger than any chat completion. ``coevo kb import`` gets files that are not exports: a
200,000-deep JSON, a line of megabytes, ``/dev/zero``, a file past the size limit.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, ClassVar

import optuna
import pytest

from coevo.agent.chat.loop import MAX_OBSERVATION_BYTES, ChatAgent, ChatModelError
from coevo.agent.chat.store import SessionStore
from coevo.agent.cli import main
from coevo.agent.llm_client import LLMSettings, RetryPolicy, chat_model
from coevo.agent.reasoners._base import KnowledgeContext, ProposeRequest
from coevo.agent.reasoners.cache import ResponseCache
from coevo.agent.reasoners.llm import PROMPT_DATA_CHARS, LLMReasoner, LLMUnavailableError, ProposeOut
from coevo.knowledge import KnowledgeBase
from coevo.knowledge.exchange import MAX_DEPTH, MAX_FILE_BYTES, MAX_LINE_BYTES, read_file
from coevo.knowledge.store import KnowledgeStore
from coevo.search.errors import UserInputError
from coevo.search.nb201 import NB201Problem, random_cell
from coevo.search.nb201.problem import complexity_niches
from coevo.search.proposers import Evaluation
from coevo.tools import Registry, Tool, ToolArgs, ToolResult
from tests.fakes import nb201_model
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import coevo_env, wait_until

MSG = [{"role": "user", "content": "propose"}]
GOOD = json.dumps({"candidates": [{"design": "|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|", "rationale": "r"}]})
HANG_S = 30.0
"""Upper bound on the wall time of the dripping-request tests, which only a hang exceeds.

A request past its 1 s deadline takes longer on a loaded 2-core machine (the watchdog's thread, the retry's
bookkeeping, the scheduler), by an amount no fixed slack bounds; a drip that is never cut takes ~100 s (400 bytes
at 0.25 s) or ~75 s (the chat stream), a request of its own. What the tests check, that each request was abandoned
in the middle of its drip, they check without a clock (the bytes the server got out, :attr:`FakeOpenAI.sent`);
the lower bounds stay (a deadline cannot end a request before it is due)."""


def _reasoner(url: str, *, retries: int, timeout_s: float = 1.0, **kw: Any) -> LLMReasoner:
    return LLMReasoner(model="fake-7b", base_url=url, transport_retries=retries, backoff_s=0.01, timeout_s=timeout_s, **kw)


# ------------------------------------------------------------------ a reply that drips


@pytest.mark.parametrize("drip_from", [0, 150], ids=["headers-drip", "body-drips"])
def test_a_dripping_reply_is_abandoned_at_the_deadline_and_retried_per_policy(drip_from: int) -> None:
    # one byte every 0.25 s: every read gets a byte, so only a deadline for the whole request ends it
    drip = {"content": "x" * 400, "drip": 0.25, "drip_from": drip_from}
    with FakeOpenAI(default=drip) as fake:
        started = time.perf_counter()
        with pytest.raises(LLMUnavailableError) as exc:
            _reasoner(fake.url, retries=2).complete(MSG)
        waited = time.perf_counter() - started
        wait_until(lambda: len(fake.sent) == 3, 10, "the server to notice each request was abandoned")
    # the retry policy's count (2 retries: 3 requests), each held to its 1 s deadline, then the reasoner's usual failure
    assert len(fake.requests) == 3
    assert 3 * 1.0 <= waited < HANG_S
    assert "did not answer in time: its reply did not finish within 1 s (--llm-timeout, the whole request)" in str(exc.value)
    assert "(3 attempts); then rerun the same command to resume" in str(exc.value)
    assert all(sent < 400 for sent in fake.sent)  # bytes were still dripping when each request was abandoned


def test_a_dripping_stream_in_chat_ends_at_the_deadline(storage: str) -> None:
    # the headers (55 bytes) arrive at once, then the events drip: a streamed body's reads count too
    store = SessionStore(storage)
    with FakeOpenAI(default={"content": "y" * 300, "drip": 0.25, "drip_from": 60}) as fake:
        agent = ChatAgent(
            chat_model(LLMSettings(fake.url, "fake-chat", timeout_s=1.0, streaming=True)),
            Registry([]),
            store,
            store.create("fake-chat"),
            storage=storage,
            confirm=lambda tool, args: True,
            stream=True,
            retry=RetryPolicy(retries=1, backoff_s=0.01),
        )
        started = time.perf_counter()
        with pytest.raises(ChatModelError, match=r"did not answer in time: its reply did not finish within 1 s"):
            agent.turn("hello")
        waited = time.perf_counter() - started
        wait_until(lambda: len(fake.sent) == 2, 10, "the server to notice each request was abandoned")
    assert 2 * 1.0 <= waited < HANG_S
    assert len(fake.requests) == 2  # no text had been shown: retried once, as chat's policy says
    # the whole answer is the 55 header bytes and events carrying 300 characters: each request ended mid-drip
    assert all(sent < 300 for sent in fake.sent)


def test_a_search_whose_endpoint_drips_once_pays_its_whole_budget(storage: str) -> None:
    # the first completion drips: abandoned at the 1 s deadline, retried (1 s backoff), then the search goes on
    drip = {"content": GOOD, "drip": 0.3}
    with FakeOpenAI([drip], default=nb201_model.reply) as fake:
        started = time.perf_counter()
        rc = main(
            [
                *("search", "--reasoner", "llm", "--llm-base-url", fake.url, "--llm-model", "fake-7b", "--llm-timeout", "1"),
                *("--budget", "30", "--storage", storage, "--study", "drip", "--tools", "off"),
            ]
        )
        wall = time.perf_counter() - started
    assert rc == 0
    states = [t.state.name for t in optuna.load_study(study_name="drip", storage=storage).trials]
    assert states.count("COMPLETE") == 30 and "RUNNING" not in states  # paid == budget
    assert len(fake.sent) == 1 and len(fake.requests) >= 2  # the dripped request, then its retry and the rest
    assert wall < 90


@pytest.mark.slow
def test_ctrl_c_during_a_dripping_request_stops_the_search_at_once(storage: str, tmp_path: Path) -> None:
    with FakeOpenAI(default={"content": GOOD, "drip": 0.5}) as fake:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "coevo.agent.cli", "search", "--reasoner", "llm", "--llm-base-url", fake.url),
                *("--llm-model", "fake-7b", "--llm-timeout", "30", "--budget", "30", "--storage", storage, "--study", "int"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=coevo_env(),
        )
        try:
            wait_until(lambda: fake.dripping.is_set() or proc.poll() is not None, 180, "the search's first LLM request")
            assert proc.poll() is None, proc.communicate()[1]
            signalled = time.perf_counter()
            proc.send_signal(signal.SIGINT)  # once: a search worker's handler alone would finish the round first
            _, err = proc.communicate(timeout=60)
            stopped = time.perf_counter() - signalled
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 130 and "interrupted; rerun the same command to resume" in err
    assert stopped < 10  # well within the 30 s deadline, with no retry after it
    states = [t.state.name for t in optuna.load_study(study_name="int", storage=storage).trials]
    # the start, whole (a third of the budget of 30: search.proposers.start_quota); nothing half-done
    assert "RUNNING" not in states and states.count("COMPLETE") == 10


# ------------------------------------------------------------------ a reply that is far too long


@pytest.mark.parametrize("length", [False, True], ids=["no-length", "content-length"])
def test_an_oversized_reply_is_cut_at_the_cap_and_never_read_whole(length: bool) -> None:
    body = 32_000_000
    with FakeOpenAI(default={"bulk": body, "length": length}) as fake:
        tracemalloc.start()
        try:
            with pytest.raises(LLMUnavailableError) as exc:
                _reasoner(fake.url, retries=1, timeout_s=20.0, max_reply_bytes=65_536).complete(MSG)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        wait_until(lambda: len(fake.sent) == 2, 20, "the server to notice the client hung up")
    assert "sent a reply longer than 65536 bytes, cut off there (a malformed reply" in str(exc.value)
    assert len(fake.requests) == 2  # malformed: retried under the policy, then reported
    assert all(sent < body for sent in fake.sent)  # the client hung up long before the end
    assert peak < 8_000_000  # what the client held: the cap and buffers, not the 32 MB


def test_an_oversized_reply_then_a_good_one_is_just_a_retry() -> None:
    with FakeOpenAI([{"bulk": 2_000_000}], default={"content": GOOD}) as fake:
        out = _reasoner(fake.url, retries=2, timeout_s=20.0, max_reply_bytes=65_536).structured(MSG, ProposeOut)
    assert out.candidates[0].rationale == "r" and len(fake.requests) == 2


# ------------------------------------------------------------------ prompts and the reply cache


def _evaluations(problem: NB201Problem, n: int) -> list[Evaluation]:
    rng = random.Random(0)
    cells = [random_cell(rng) for _ in range(n)]
    return [Evaluation(k, c, problem.point_id(c), {o.name: 1.0 + k for o in problem.objectives}, True) for k, c in enumerate(cells)]


def test_a_prompt_carries_the_newest_evidence_that_fits_and_says_what_was_left_out() -> None:
    problem = NB201Problem(dataset="cifar10", device="fpga")
    rows = _evaluations(problem, 3000)
    ctx = KnowledgeContext(problem=problem, niches=complexity_niches(), round=9, evaluations=tuple(rows))
    with FakeOpenAI(default={"content": '{"heuristics": []}'}) as fake:
        _reasoner(fake.url, retries=0).update_knowledge(KnowledgeBase(), rows, ctx)
    prompt = fake.user_prompts()[0]
    shown = [int(line.split()[2]) for line in prompt.splitlines() if line.startswith("- trial ")]
    assert 0 < len(shown) < 3000 and shown == list(range(3000 - len(shown), 3000))  # the newest, in order
    assert f"Left out for length: {3000 - len(shown)} of 3000 trials of new evidence (the oldest)" in prompt
    assert len(prompt) < PROMPT_DATA_CHARS + 4000  # the budget plus the template's own text


def test_an_overlong_rejection_note_is_cut_in_the_prompt() -> None:
    problem = NB201Problem(dataset="cifar10", device="fpga")
    niche = complexity_niches()[2]
    request = ProposeRequest(
        problem=problem,
        niche=niche,
        quota=2,
        elites=(),
        heuristics=(),
        evaluations=(),
        seen=frozenset(),
        round=1,
        rng=random.Random(0),
        feedback=("z" * 3_000_000,),  # e.g. a model's megabyte-long 'design' echoed back in a rejection
    )
    with FakeOpenAI(default=nb201_model.reply) as fake:
        _reasoner(fake.url, retries=0, tools=False).propose(request)
    prompt = fake.user_prompts()[0]
    assert "[cut: 2000 of 3000000 characters]" in prompt and len(prompt) < 10_000


def test_the_reply_cache_of_a_study_stays_within_its_bound_oldest_first(storage: str) -> None:
    cache = ResponseCache(storage, max_study_chars=5_000)
    with FakeOpenAI(default=lambda body: {"content": body["messages"][-1]["content"].ljust(300, ".")}) as fake:
        reasoner = _reasoner(fake.url, retries=0, cache=cache)
        for k in range(60):
            reasoner.complete([{"role": "user", "content": f"prompt {k}"}], study="a")
            assert cache.size("a")[1] <= 5_000
        replies, chars = cache.size("a")
        assert replies == 5_000 // 300 and chars == replies * 300  # full to the bound, no further
        paid = len(fake.requests)
        reasoner.complete([{"role": "user", "content": "prompt 59"}], study="a")  # the newest: still cached
        assert len(fake.requests) == paid
        reasoner.complete([{"role": "user", "content": "prompt 0"}], study="a")  # the oldest: evicted, paid again
        assert len(fake.requests) == paid + 1
        reasoner.complete([{"role": "user", "content": "prompt 0"}], study="b")
    assert cache.size("b") == (1, 300)  # another study's bound is its own


# ------------------------------------------------------------------ a tool result too long for the chat model


class _FloodArgs(ToolArgs):
    pass


class _Flood(Tool):
    name = "demo.flood"
    description = "Return far more text than a model should read (a fault test)."
    Args = _FloodArgs
    example: ClassVar[dict[str, Any]] = {}

    def run(self, args: _FloodArgs) -> ToolResult:
        return ToolResult(value={"text": "é" * 50_000})  # two bytes per character


def test_a_tool_result_reaches_the_chat_model_truncated_with_a_note(storage: str) -> None:
    store = SessionStore(storage)
    full: list[str] = []
    with FakeOpenAI([{"tool_calls": [{"name": "demo_flood", "arguments": {}}]}, {"content": "done"}]) as fake:
        agent = ChatAgent(
            chat_model(LLMSettings(fake.url, "fake-chat", timeout_s=10.0)),
            Registry([_Flood()]),
            store,
            store.create("fake-chat"),
            storage=storage,
            confirm=lambda tool, args: True,
            stream=False,
            on_event=lambda kind, data: full.append(data["output"]) if kind == "tool_end" else None,
        )
        assert agent.turn("flood me").answer == "done"
    sent = next(m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool")
    whole = len(full[0].encode())
    assert whole > 100_000
    head, note = sent.rsplit("\n", 1)
    kept = len(head.encode())
    assert MAX_OBSERVATION_BYTES - 1 <= kept <= MAX_OBSERVATION_BYTES  # cut on a character boundary
    assert note.startswith(f"[truncated: {kept} of {whole} bytes; ask for less")


# ------------------------------------------------------------------ kb import of files that are not exports


def _import(path: Path | str, storage: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["kb", "import", str(path), "--storage", storage, "--study", "imp"])
    return rc, capsys.readouterr().err.strip()


def test_kb_import_of_a_deeply_nested_line_is_one_line_and_imports_nothing(
    storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {"key": "k", "text": "a claim", "scope": {}, "confidence": 0.5, "status": "proposed", "author": "me"}
    path = tmp_path / "deep.jsonl"
    for deep in ("[" * 200_000 + "]" * 200_000, '{"key": "k]", "text": ' + "[" * 200_000 + '"]"' + "]" * 200_000 + "}"):
        path.write_text(json.dumps(good) + "\n" + deep + "\n")
        rc, err = _import(path, storage, capsys)
        assert rc == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
        assert f"line 2 nests deeper than {MAX_DEPTH} levels; nothing imported" in err
        assert not KnowledgeStore.for_storage(storage).exists("imp")  # the good first line was not imported either


def test_kb_import_of_a_too_long_line_or_too_large_file_is_one_line_and_imports_nothing(
    storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {"key": "k", "text": "a claim", "scope": {}, "confidence": 0.5, "status": "proposed", "author": "me"}
    long = tmp_path / "long.jsonl"
    long.write_text(json.dumps(good) + "\n" + json.dumps({**good, "key": "j", "text": "x" * (2 * MAX_LINE_BYTES)}) + "\n")
    rc, err = _import(long, storage, capsys)
    assert rc == 2 and len(err.splitlines()) == 1
    assert f"line 2 is longer than {MAX_LINE_BYTES} bytes; nothing imported" in err
    big = tmp_path / "big.jsonl"
    with big.open("wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: no time, no disk
    rc, err = _import(big, storage, capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and f"the file is larger than {MAX_FILE_BYTES} bytes" in err
    assert not KnowledgeStore.for_storage(storage).exists("imp")


def test_a_stream_of_bad_lines_past_the_file_limit_is_refused_where_it_passes(tmp_path: Path) -> None:
    # a pipe has no size to check first: the limit is counted while reading, and the bad lines are counted, not kept
    with subprocess.Popen(["sh", "-c", "yes '{}' | head -c 200000"], stdout=subprocess.PIPE) as producer:
        assert producer.stdout is not None
        with pytest.raises(UserInputError, match=r"the file is larger than 65536 bytes; nothing imported"):
            read_file(Path(f"/dev/fd/{producer.stdout.fileno()}"), max_file_bytes=65_536)
    few = tmp_path / "bad.jsonl"
    few.write_text("{}\n" * 500)
    with pytest.raises(UserInputError) as exc:
        read_file(few)
    assert "500 bad line(s), nothing imported" in str(exc.value) and "... and 490 more" in str(exc.value)


CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a regression fails here, not on the machine
from coevo.agent.cli import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
rc = main(sys.argv[1:])
print("rss_kib", before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(rc)
"""


def test_kb_import_of_dev_zero_ends_with_the_line_limit_in_bounded_memory(storage: str, tmp_path: Path) -> None:
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-c", CHILD, "kb", "import", "/dev/zero", "--storage", storage, "--study", "imp"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=coevo_env(),
        timeout=120,
    )
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr
    assert len(lines) == 2 and f"/dev/zero: line 1 is longer than {MAX_LINE_BYTES} bytes; nothing imported" in lines[0]
    _, before, after = lines[1].split()
    assert int(after) - int(before) < 64 * 1024  # KiB: the line limit and a read buffer, not the device
    assert time.perf_counter() - started < 60
    assert not KnowledgeStore.for_storage(storage).exists("imp")
