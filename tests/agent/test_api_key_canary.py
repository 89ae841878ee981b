"""The API key never leaves the process environment: a canary key, given the way users give it (``OPENAI_API_KEY``),
must not appear in any file coevo writes, any output, or the command line of any process while they run.

Covered, all against the loopback fake endpoint: ``coevo chat --once`` whose model starts a background
search (``search.start``, itself an LLM-reasoner search), a foreground ``coevo search --reasoner llm`` (see
:data:`WORKERS`), ``coevo kb export`` and ``coevo kb report``. Grepped: every file under the test's folder
(the study database with its chat sessions, round logs, knowledge base and response cache, SQLite side
files, the background job's log, the export, the report), every process's stdout and stderr, and ``ps``
output sampled every 50 ms for the whole run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import optuna
import pytest

from coevo.agent.chat.store import SessionStore
from coevo.search.round_log import read_round_logs
from tests.fakes import nb201_model
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import coevo_env, wait_until

CANARY = "sk-coevo-canary-3f9a1c7e5b2d"
"""A fake key: it must reach the endpoint and nothing else."""

WORKERS = [1, 2]
"""``coevo search --workers N`` cases of the foreground search. With 2, the workers ``coevo search`` spawns are
covered too (their command lines in ``ps``, their output): a change to how workers get the reasoner settings
(agent/cli_runs.py) must keep this test passing; add cases here rather than a new test."""


def search_command(storage: str, study: str, workers: int) -> list[str]:
    """The foreground LLM search of the test (arguments after ``python -m agent.cli``)."""
    command = ["search", "--problem", "nb201", "--proposer", "pelnas", "--reasoner", "llm", "--budget", "30"]
    command += ["--study", study, "--storage", storage, "--json"]
    return command + (["--workers", str(workers)] if workers > 1 else [])


@contextmanager
def ps_samples(period_s: float = 0.05) -> Iterator[list[str]]:
    """Every distinct ``ps`` line (pid and full command line of every process) seen while the block runs."""
    seen: dict[str, None] = {}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            lines = subprocess.run(["ps", "-eww", "-o", "pid=,args="], capture_output=True, text=True, check=True).stdout
            seen.update(dict.fromkeys(lines.splitlines()))
            stop.wait(period_s)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    out: list[str] = []
    try:
        yield out
    finally:
        stop.set()
        thread.join()
        out.extend(seen)


def files_containing(root: Path, needle: bytes) -> tuple[list[Path], list[Path]]:
    """(every file under ``root``, those whose bytes contain ``needle``)."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return files, [p for p in files if needle in p.read_bytes()]


def _answer(storage: str) -> Any:
    """The fake endpoint: the chat model starts a background search, the reasoners get NB201 answers."""

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        if "tools" not in request:
            return nb201_model.reply(request)
        if request["messages"][-1]["role"] == "tool":
            return {"content": "Started study bg in the background."}
        start = {"proposer": "pelnas", "budget": 26, "options": {"device": "fpga"}, "storage": storage, "study": "bg"}
        return {"tool_calls": [{"name": "search_start", "arguments": start}]}

    return answer


def _run(args: list[str], env: dict[str, str], cwd: Path, outputs: list[str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "coevo.agent.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    outputs += [proc.stdout, proc.stderr]
    assert proc.returncode == 0, f"coevo {' '.join(args)} failed:\n{proc.stderr[-2000:]}"
    return proc


def _wait_gone(pid: int, timeout_s: float = 240) -> None:
    """Wait until process ``pid`` (not our child: its parent, chat, has exited) has finished."""
    stat = Path(f"/proc/{pid}/stat")

    def gone() -> bool:
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except (FileNotFoundError, ProcessLookupError):
            return True

    wait_until(gone, timeout_s, f"background search {pid} to finish")


@pytest.mark.parametrize(
    "workers",
    # with several worker processes the case takes about 27 s on 2 cores: slow; one process (about 22 s) stays in test-fast
    [pytest.param(n, id=f"workers-{n}", marks=[pytest.mark.slow] if n > 1 else []) for n in WORKERS],
)
def test_the_api_key_reaches_the_endpoint_and_nothing_else(tmp_path: Path, workers: int) -> None:
    (tmp_path / "runs").mkdir()
    storage = f"sqlite:///{tmp_path / 'runs' / 'coevo.sqlite3'}"
    base = {k: v for k, v in coevo_env().items() if not k.startswith(("COEVO_", "OPENAI_"))}
    outputs: list[str] = []
    with FakeOpenAI(default=_answer(storage)) as fake, ps_samples() as ps:
        env = {**base, "OPENAI_API_KEY": CANARY, "COEVO_LLM_BASE_URL": fake.url, "COEVO_LLM_MODEL": "fake-7b"}
        ask = "start a pelnas search on the fpga"
        session = SessionStore(storage).create(None)  # --once records into a named session (without one it keeps none)
        chat = _run(["chat", "--storage", storage, "--session", session, "--once", ask, "--yes", "--json"], env, tmp_path, outputs)
        assert json.loads(chat.stdout)["session"] == session
        started = next(e for e in SessionStore(storage).events(session) if e.kind == "tool_result")
        _wait_gone(json.loads(started.content)["value"]["pid"])
        _run(search_command(storage, "fg", workers), env, tmp_path, outputs)
        export = _run(["kb", "export", "--storage", storage, "--study", "fg"], env, tmp_path, outputs)
        _run(["kb", "export", "--storage", storage, "--study", "bg", "--out", "runs/bg.jsonl"], env, tmp_path, outputs)
        _run(["kb", "report", "--storage", storage, "--study", "fg", "--out", "runs/report"], env, tmp_path, outputs)

    # the canary was live: every request carried it, from the chat model and from the reasoners
    assert fake.authorizations and set(fake.authorizations) == {f"Bearer {CANARY}"}
    assert any("tools" in r for r in fake.requests) and any("Propose" in p for p in fake.user_prompts())
    # and everything it could leak into exists, so the greps below look at real content
    assert json.loads((tmp_path / "runs" / "jobs" / "bg.log").read_text().splitlines()[-1])["evaluations"] == 26
    logs = {s: read_round_logs(storage, optuna.load_study(study_name=s, storage=storage)) for s in ("bg", "fg")}
    assert all(logs.values()) and all(log["reasoner"] == "llm:fake-7b" for rounds in logs.values() for log in rounds.values())
    assert export.stdout.strip() and (tmp_path / "runs" / "bg.jsonl").read_text().strip()
    assert (tmp_path / "runs" / "report" / "report.md").is_file()

    files, leaking = files_containing(tmp_path, CANARY.encode())
    assert tmp_path / "runs" / "coevo.sqlite3" in files and len(files) > 5
    assert leaking == [], f"the API key was written to {leaking}"
    assert not [o for o in outputs if CANARY in o], "the API key was printed"
    assert CANARY not in json.dumps(logs) and CANARY not in json.dumps([e.content for e in SessionStore(storage).events(session)])
    # ps saw the processes while they ran (so a key on their command lines would have been caught) ...
    ours = [line for line in ps if "coevo.agent.cli" in line and str(tmp_path) in line]
    assert any(" chat " in line for line in ours) and any("--study bg" in line for line in ours)
    assert any("--study fg" in line for line in ours)
    if workers > 1:
        assert any(" worker " in line for line in ours), "no worker process was seen"
    # ... and no command line ever carried the key
    assert not [line for line in ps if CANARY in line]
