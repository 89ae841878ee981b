"""Chat's model is confined to what the user opened (issue 28): other storages, SQLite URIs, code that looks like a URL,
a study's stored problem file, heuristics the model grades itself; and a problem file that hangs or exits at import.

Each test reproduces one break found by a fault-injection review and checks the fixed behaviour: refused or asked
first, nothing created, nothing imported, one line and the right exit code.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy as sa

from coevo.agent.cli import main
from coevo.agent.reasoners._base import KnowledgeContext
from coevo.agent.reasoners.llm import LLMReasoner
from coevo.knowledge.heuristics import Heuristic, KnowledgeBase
from coevo.knowledge.validation import Outcome, apply, records
from coevo.search.errors import UserInputError
from coevo.search.nb201 import NB201Problem
from coevo.search.plugins import load_reference, parse_reference
from coevo.search.problems import make_problem
from coevo.search.runner import run_search
from coevo.search.storage import resolve_storage_url, sqlite_target
from coevo.search.study import ATTR_PROBLEM_REF, evaluations_from_study
from coevo.tools import REGISTRY, CallPolicy, StorageNotAllowedError, call_tool
from coevo.tools._base import names_code
from tests.fakes.openai_server import FakeOpenAI
from tests.helpers import coevo_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "tiled_matmul.py"
FAST = {"size": 64, "repeats": 1}


@pytest.fixture(autouse=True)
def _no_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("COEVO_LLM_BASE_URL", "COEVO_LLM_MODEL", "OPENAI_API_KEY", "COEVO_WORKSPACE", "COEVO_IMPORT_TIME_LIMIT_S"):
        monkeypatch.delenv(var, raising=False)


def chat_turn(
    capfd: pytest.CaptureFixture[str], storage: str, calls: list[dict[str, Any]], *extra: str
) -> tuple[int, list[str], dict[str, Any]]:
    """One ``coevo chat --once ... --json`` turn whose model makes ``calls``; exit code, each call's observation, the record."""
    with FakeOpenAI([{"tool_calls": calls}, {"content": "done"}]) as fake:
        capfd.readouterr()
        code = main(["chat", "--storage", storage, "--once", "go", "--json", "--llm-base-url", fake.url, "--llm-model", "m", *extra])
        out, _ = capfd.readouterr()
    observations = [m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    return code, observations, json.loads(out)


# ---------------------------------------------------------------- storages


@pytest.fixture
def other_database(postgres_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database (unique name) that the chat was not given; dropped afterwards."""
    name = f"coevo_i28chat_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(resolve_storage_url(postgres_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def table_count(url: str) -> int:
    engine = sa.create_engine(resolve_storage_url(url))
    try:
        with engine.connect() as conn:
            return len(sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_another_postgres_database_is_refused_and_nothing_is_created_there(
    capfd: pytest.CaptureFixture[str], storage: str, other_database: str
) -> None:
    calls = [
        {"name": "studies_list", "arguments": {"storage": other_database}},
        {"name": "kb_list", "arguments": {"study": "x", "storage": other_database}},
    ]
    code, observations, record = chat_turn(capfd, storage, calls, "--yes")  # --yes answers questions; it allows no storage
    assert code == 0 and [c["ok"] for c in record["value"]["tool_calls"]] == [False, False]
    for observation in observations:
        assert observation.startswith("error:") and "is not a storage this session may use" in observation
        assert f"--allow-storage {other_database}" in observation and "\n" not in observation
    assert table_count(other_database) == 0  # before the fix: 13 Optuna tables from studies.list, 4 knowledge tables from kb.list
    # allowed by the user, it is read, and still nothing is created in it
    code, observations, record = chat_turn(capfd, storage, calls, "--allow-storage", other_database)
    listed = json.loads(observations[0])
    assert code == 0 and listed["value"]["studies"] == [] and "no coevo studies" in listed["messages"][0]
    assert observations[1].startswith("error:") and "no knowledge store" in observations[1] and "nothing was created" in observations[1]
    assert table_count(other_database) == 0


def test_the_same_server_database_written_another_way_is_the_chats_own(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    own = "postgresql://alice:secret@DB.example:5432/coevo"
    policy = CallPolicy.model(ws, lambda tool, args: True, storage=own, allowed_storages=("mysql://bob@db2/other",))
    listing = REGISTRY.get("studies.list")
    for same in (
        "postgresql+psycopg://alice@db.example/coevo",
        "postgresql://alice:other@db.example:5432/coevo",
        "mysql://bob@db2:3306/other",
    ):
        policy.admit(listing, listing.Args.model_validate({"storage": same}))  # admitted: same host, port, database, user
    for other in (
        "postgresql://alice@db.example/coevo2",
        "postgresql://mallory@db.example/coevo",
        "postgresql://alice@db.example/coevo?host=x",
    ):
        with pytest.raises(StorageNotAllowedError, match="--allow-storage") as err:
            policy.admit(listing, listing.Args.model_validate({"storage": other}))
        assert "secret" not in str(err.value)  # the session's password is never shown


def test_a_sqlite_uri_is_checked_on_the_file_it_really_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)  # the chat's storage is ./coevo.sqlite3: the workspace is the working folder
    outside = tmp_path / "outside.sqlite3"
    # the folder the old check took the URI for; a model can make it (noc.plot out=file:/.../x.png lies in the workspace)
    (ws / f"file:{tmp_path}").mkdir(parents=True)
    policy = CallPolicy.model(ws, lambda tool, args: True, storage="sqlite:///coevo.sqlite3")
    listing = REGISTRY.get("studies.list")
    (ws / "link.sqlite3").symlink_to(outside)
    for url in (
        f"sqlite:///file:{outside}?mode=rwc&uri=true",
        f"sqlite:///file://localhost{outside}?mode=rwc&uri=true",
        f"sqlite:///file:{str(outside).replace('/', '%252F')}?mode=rwc&uri=true",  # SQLite's own escapes, under SQLAlchemy's
        f"sqlite:///{ws}/link.sqlite3",
    ):
        with pytest.raises(StorageNotAllowedError, match=re.escape(f"it opens '{outside}'")):
            call_tool(listing, {"storage": url}, policy=policy)
    assert not outside.exists()  # before the fix the first URL created it
    for url in (f"sqlite:///file:{ws}/in.sqlite3?mode=rwc&uri=true", "sqlite:///file::memory:?uri=true", "sqlite:///:memory:"):
        assert call_tool(listing, {"storage": url}, policy=policy).value["studies"] == []
    assert not (ws / "in.sqlite3").exists()  # a reader creates nothing
    assert sqlite_target("sqlite:///file:///a/b.db?uri=true") == Path("/a/b.db")
    assert sqlite_target("sqlite:///file:rel.db?uri=true&mode=memory") == "memory"


# ---------------------------------------------------------------- code


def test_a_url_looking_reference_is_code_and_asks_first(capfd: pytest.CaptureFixture[str], storage: str, tmp_path: Path) -> None:
    folder = tmp_path / "x:"
    folder.mkdir()
    marker = tmp_path / "outside" / "evil.ran"  # outside the chat's workspace
    marker.parent.mkdir()
    (folder / "evil.py").write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\ndef make():\n    return None\n")
    ref = "x://evil.py:make"
    call = {"name": "pipeline_profile", "arguments": {"model": ref, "resolution": 4}}
    (tmp_path / "ws").mkdir()  # coevo chat refuses a --workspace that is no folder
    ws = ["--workspace", str(tmp_path / "ws")]
    code, observations, _ = chat_turn(capfd, storage, [call], *ws)
    assert code == 0 and observations[0].startswith("the user declined to run pipeline_profile")
    assert not marker.exists()  # before the fix: imported without --yes, and it wrote outside the workspace
    chat_turn(capfd, storage, [call], *ws, "--yes")
    assert marker.exists()  # the loader does import it: it is code, and --yes allowed it


@pytest.mark.parametrize(
    ("value", "code"),
    [
        ("x://evil.py:make", True),
        ("http://host/mod.py:f", True),
        ("pkg.mod:Cls.attr", True),
        ("postgresql://u@h:5432/db", False),
        ("https://host:8080/path", False),
        ("a:b c", False),
        ("nb201", False),
    ],
)
def test_names_code_and_the_loader_read_a_value_alike(value: str, code: bool) -> None:
    assert names_code(value) is code and (parse_reference(value) is not None) is code
    if not code:
        with pytest.raises(UserInputError, match=re.escape("give module:Class or path/to/file.py:Class")):
            load_reference(value, what="model")  # not code for the check: the loader imports nothing either


@pytest.fixture
def marked_study(tmp_path: Path, storage: str) -> tuple[str, Path]:
    """A study whose problem is a user file that writes ``<file>.imported`` when it is imported (never imported here yet)."""
    run_search(make_problem(f"{EXAMPLE}:TiledMatmul", FAST), "random", budget=2, storage=storage, study_name="mm")
    marked = tmp_path / "marked.py"
    source = EXAMPLE.read_text()
    hook = "from __future__ import annotations\nfrom pathlib import Path\nPath(__file__).with_suffix('.imported').write_text('x')\n"
    marked.write_text(source.replace("from __future__ import annotations\n", hook, 1))
    optuna.load_study(study_name="mm", storage=storage).set_user_attr(ATTR_PROBLEM_REF, f"{marked}:TiledMatmul")
    return storage, marked.with_suffix(".imported")


@pytest.mark.parametrize("tool", ["study_front", "search_status"])
def test_a_tool_reopening_a_study_asks_before_importing_its_problem_file(
    capfd: pytest.CaptureFixture[str], marked_study: tuple[str, Path], tool: str
) -> None:
    storage, marker = marked_study
    call = {"name": tool, "arguments": {"study": "mm"}}
    code, observations, _ = chat_turn(capfd, storage, [call])
    assert code == 0 and observations[0].startswith(f"the user declined to run {tool}") and not marker.exists()
    capfd.readouterr()
    assert main(["chat", "--storage", storage, "--once", f'/run {tool.replace("_", ".", 1)} {{"study": "mm"}}', "--json"]) == 2
    assert "loads the code its study names" in json.loads(capfd.readouterr().out)["summary"] and not marker.exists()  # /run asks too
    code, observations, _ = chat_turn(capfd, storage, [call], "--yes")
    assert json.loads(observations[0])["value"]["study"] == "mm" and marker.exists()


def test_runs_show_and_list_show_progress_without_importing_a_user_problem(
    capsys: pytest.CaptureFixture[str], marked_study: tuple[str, Path]
) -> None:
    storage, marker = marked_study
    assert main(["runs", "show", "mm", "--storage", storage, "--json"]) == 0
    out, err = capsys.readouterr()
    info = json.loads(out)
    assert (info["evaluations"], info["budget"], info["hv_ratio"], info["front_size"]) == (2, 2, None, None)
    assert info["not_loaded"] == [f"{marker.with_suffix('.py')}:TiledMatmul"] and "pass --yes" in err and len(err.splitlines()) == 1
    assert main(["runs", "list", "--storage", storage]) == 0 and "mm" in capsys.readouterr().out
    assert not marker.exists()  # before the fix `coevo runs show` imported it
    assert main(["runs", "show", "mm", "--storage", storage, "--json", "--yes"]) == 0
    assert json.loads(capsys.readouterr().out)["front_size"] >= 1 and marker.exists()


# ---------------------------------------------------------------- the model's own heuristics


def test_a_heuristic_the_model_writes_starts_proposed_with_no_confidence(storage: str) -> None:
    problem = NB201Problem(dataset="cifar10", device="fpga")
    result = run_search(problem, "random", budget=6, storage=storage, study_name="r")
    evaluations = tuple(evaluations_from_study(problem, optuna.load_study(study_name="r", storage=storage)))
    kb = KnowledgeBase()
    kb.heuristics["H1"] = Heuristic(id="H1", key="k1", text="measured claim", scope={}, confidence=0.6, status="validated")
    claims = [
        {"id": None, "text": "my own rule, believe it", "confidence": 0.99, "status": "validated", "support": [], "refute": []},
        {"id": "H1", "text": "measured claim, reworded", "confidence": 0.99, "status": "validated", "support": [], "refute": []},
    ]
    ctx = KnowledgeContext(problem=problem, niches=tuple(problem.niches()), round=1, evaluations=evaluations, study=result.study)
    with FakeOpenAI(default={"content": json.dumps({"heuristics": claims})}) as fake:
        LLMReasoner(model="fake-7b", base_url=fake.url, backoff_s=0.01, timeout_s=5.0).update_knowledge(kb, evaluations, ctx)
    mine = next(h for h in kb.heuristics.values() if h.text == "my own rule, believe it")
    assert (mine.status, mine.confidence) == ("proposed", 0.0)  # before the fix: validated, 0.99, no evidence
    assert (kb.heuristics["H1"].status, kb.heuristics["H1"].confidence) == ("validated", 0.6)  # kept, never raised by the model's word
    # evidence still moves it: six citing proposals that all extend their niche's front validate it
    wins = [Outcome(trial, 1, "n", True, 1.0, (mine.id,)) for trial in range(6)]
    losses = [Outcome(10 + trial, 1, "n", False, -1.0, ()) for trial in range(6)]
    changes, _ = apply(kb, records([*wins, *losses]), study="r", round_no=2)
    assert mine.status == "validated" and mine.confidence > 0.4 and any(mine.id in c for c in changes)


# ---------------------------------------------------------------- defaults


def test_the_chats_tools_default_to_its_own_storage(capfd: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    storage = f"sqlite:///{folder / 's.sqlite3'}"
    run_search(NB201Problem(dataset="cifar10", device="fpga"), "random", budget=2, storage=storage, study_name="mine")
    calls = [{"name": "studies_list", "arguments": {}}, {"name": "study_front", "arguments": {"study": "mine"}}]
    code, observations, _ = chat_turn(capfd, storage, calls)
    assert code == 0 and [s["study"] for s in json.loads(observations[0])["value"]["studies"]] == ["mine"]  # before: refused
    assert json.loads(observations[1])["value"]["evaluations"] == 2
    assert main(["chat", "--storage", storage, "--once", "/run studies.list {}", "--json"]) == 0
    assert [s["study"] for s in json.loads(capfd.readouterr().out)["value"]["value"]["studies"]] == ["mine"]
    assert not Path("runs").exists()  # the default ./runs storage was never touched


# ---------------------------------------------------------------- problem files that do not import


@pytest.mark.slow
def test_a_problem_file_that_loops_at_import_gives_up_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "loops.py").write_text("while True:\n    pass\n")
    (tmp_path / "waits.py").write_text("import time\ntime.sleep(3600)\n")  # a module on the path, waiting
    env = {**coevo_env(), "COEVO_IMPORT_TIME_LIMIT_S": "2"}
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    cases = [
        (["problems", "describe", "loops.py:P"], "loops.py did not finish importing in 2 s"),
        (["search", "--problem", "loops.py:P", "--budget", "2"], "loops.py did not finish importing in 2 s"),
        (["search", "--problem", "waits:P", "--budget", "2"], "module 'waits' did not finish importing in 2 s"),
    ]
    for args, says in cases:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "coevo.agent.cli", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
        )
        seconds = time.monotonic() - started
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr  # before: hung, silently
        assert says in done.stderr and "COEVO_IMPORT_TIME_LIMIT_S" in done.stderr
        assert seconds < 120  # the limit, plus a loaded machine's start-up
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("import sys\nsys.exit(0)\n", "exits.py called sys.exit(0) while importing"),
        ("raise BaseException('odd')\n", "exits.py raised BaseException while importing: odd"),
        ("raise GeneratorExit\n", "exits.py raised GeneratorExit while importing\n"),
    ],
)
def test_a_problem_file_that_exits_at_import_is_one_line_and_exit_2(
    source: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "exits.py").write_text(source)
    assert main(["search", "--problem", "exits.py:P", "--budget", "2"]) == 2  # before: exit 0 having done nothing, or a traceback
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "Traceback" not in err
    assert not Path("runs").exists()


def test_the_import_time_limit_is_read_once_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("soon", "here", "there"):
        (tmp_path / f"{name}.py").write_text("import threading\nWHERE = threading.current_thread().name\n")
    monkeypatch.setenv("COEVO_IMPORT_TIME_LIMIT_S", "soon")
    with pytest.raises(UserInputError, match=r"^COEVO_IMPORT_TIME_LIMIT_S='soon' is not a number of seconds"):
        load_reference(f"{tmp_path / 'soon.py'}:WHERE", what="problem")
    monkeypatch.setenv("COEVO_IMPORT_TIME_LIMIT_S", "0")  # off: imported in the calling thread, as before
    assert load_reference(f"{tmp_path / 'here.py'}:WHERE", what="problem") == "MainThread"
    monkeypatch.delenv("COEVO_IMPORT_TIME_LIMIT_S")  # the default limit: a helper thread, while this one waits
    assert load_reference(f"{tmp_path / 'there.py'}:WHERE", what="problem").startswith("coevo-import")
