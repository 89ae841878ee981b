"""Database faults: every wait is bounded, a fault is one line naming what happened, nothing is lost.

PostgreSQL faults are injected by a TCP proxy in front of the local server (127.0.0.1:5432):
``refuse`` (the server went down), ``blackhole`` (connections stay open, no byte passes: a
silent partition or a hung server). SQLite faults are real files: garbage written over a page
of a study made by a tiny search, a study whose file or folder cannot be written.

Each test runs in seconds: workers get a small ``--db-timeout`` and ``--db-patience``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa

from coevo.search.db_errors import classify
from coevo.search.errors import StorageError
from coevo.search.nb201 import NB201Problem
from coevo.search.proposers import get_proposer
from coevo.search.storage import DatabaseTimeouts, engine_options, resolve_storage_url
from coevo.search.study import open_study
from coevo.search.workers import Coordination, with_database_retry
from tests.faults.tcp_proxy import FaultyProxy, Mode
from tests.helpers import coevo_env, wait_until

FAST = ["--heartbeat", "1", "--grace", "3"]
SHORT = DatabaseTimeouts(request_s=2.0)
"""Small bounds for the in-process checks: connect 2 s, statement 2 s, no reply after 4 s."""


@pytest.fixture
def proxy() -> Iterator[FaultyProxy]:
    """A proxy in front of the local PostgreSQL server, passing bytes to begin with."""
    p = FaultyProxy(("127.0.0.1", 5432))
    yield p
    p.close()


def _via(postgres_url: str, proxy: FaultyProxy) -> str:
    return postgres_url.replace("127.0.0.1:5432", proxy.address)


def _create(storage: str, budget: int) -> str:
    name = f"dbf-{uuid.uuid4().hex[:10]}"
    open_study(
        NB201Problem(dataset="cifar10", device="fpga"), get_proposer("random"), storage=storage, study_name=name, seed=0, budget=budget
    )
    return name


def _coevo(*args: str, cwd: Path, timeout: float = 120) -> tuple[int, str, str, float]:
    """Run ``coevo ARGS`` in a process: (exit status, stdout, stderr, seconds)."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "coevo.agent.cli", *args], cwd=cwd, env=coevo_env(), capture_output=True, text=True, timeout=timeout
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def _worker(storage: str, study: str, *extra: str, cwd: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "coevo.agent.cli", "worker", "--storage", storage, "--study", study, "--quiet", *FAST, *extra]
    return subprocess.Popen(cmd, cwd=cwd, env=coevo_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _one_error_line(stderr: str) -> str:
    """The one ``error:`` line of a command's stderr (retry warnings may precede it; no traceback may)."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    return errors[0]


def _paid(storage: str, study: str) -> int:
    trials = optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)
    return sum(t.state == optuna.trial.TrialState.COMPLETE and bool(t.user_attrs.get("query", True)) for t in trials)


def _assert_paid_exactly_once(storage: str, study: str, budget: int) -> None:
    """The budget paid exactly, each point once, nothing left RUNNING or WAITING, every claim evaluated."""
    trials = optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)
    paid = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("query", True)]
    points = Counter(t.user_attrs["point_id"] for t in paid)
    states = Counter(t.state.name for t in trials)
    assert len(paid) == budget and max(points.values()) == 1, (len(paid), points.most_common(3))
    assert "RUNNING" not in states and "WAITING" not in states, states
    assert Coordination(storage, study).counts() == (budget, budget)


# ---------------------------------------------------------------- the bounds themselves


@pytest.mark.postgres
def test_a_postgres_engine_carries_every_bound_of_one_declaration(postgres_url: str) -> None:
    url = resolve_storage_url(postgres_url)
    engine = sa.create_engine(url, **engine_options(url, SHORT))
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "2s"
            assert conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar() == "4s"
            params = conn.connection.dbapi_connection.info.get_parameters()  # type: ignore[union-attr]
            assert params["connect_timeout"] == "2" and params["keepalives"] == "1" and int(params["tcp_user_timeout"]) > 0
            started = time.monotonic()
            with pytest.raises(sa.exc.OperationalError) as stuck:
                conn.exec_driver_sql("SELECT pg_sleep(30)")  # a stuck statement
        assert time.monotonic() - started < 15
        fault = classify(stuck.value)
        assert fault is not None and fault.kind == "statement timeout" and fault.transient
    finally:
        engine.dispose()


@pytest.mark.slow
@pytest.mark.postgres
def test_a_silent_server_is_no_reply_within_the_bound(postgres_url: str, proxy: FaultyProxy) -> None:
    url = resolve_storage_url(_via(postgres_url, proxy))
    engine = sa.create_engine(url, **engine_options(url, SHORT))
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
            proxy.set("blackhole")  # the open connection hears nothing from now on
            started = time.monotonic()
            with pytest.raises(sa.exc.OperationalError) as silent:
                conn.exec_driver_sql("SELECT 1")
        waited = time.monotonic() - started
        fault = classify(silent.value)
        assert fault is not None and fault.kind == "no reply" and fault.transient, silent.value
        assert SHORT.reply_s - 0.5 <= waited < SHORT.reply_s + 10, waited
        started = time.monotonic()
        with pytest.raises(sa.exc.OperationalError) as connecting, engine.connect():  # a new connection: no answer to its start-up
            pass
        fault = classify(connecting.value)
        assert fault is not None and fault.kind == "no reply" and "connect timeout" in fault.reason
        assert time.monotonic() - started < SHORT.connect_s + 10
    finally:
        proxy.set("pass")
        engine.dispose()


# ---------------------------------------------------------------- workers and commands on a PostgreSQL that goes away


@pytest.mark.slow
@pytest.mark.postgres
def test_a_worker_whose_database_is_blackholed_stops_then_resumes_exactly(postgres_url: str, proxy: FaultyProxy, tmp_path: Path) -> None:
    budget = 60
    study = _create(postgres_url, budget)
    patience, timeout = 3.0, DatabaseTimeouts(request_s=2.0)
    via = _via(postgres_url, proxy)
    worker = _worker(via, study, "--db-patience", str(patience), "--db-timeout", str(timeout.request_s), cwd=tmp_path)

    def paying() -> bool:
        assert worker.poll() is None, worker.communicate()
        return _paid(postgres_url, study) >= 5

    wait_until(paying, 120, "the worker to pay 5 evaluations")
    proxy.set("blackhole")
    started = time.monotonic()
    _, stderr = worker.communicate(timeout=120)
    stopped_after = time.monotonic() - started
    assert worker.returncode == 2, stderr
    line = _one_error_line(stderr)
    assert "no reply" in line and "Nothing is lost" in line, line
    # patience, plus at most one request's bounds (a reply, then a connect), plus exit: not the hang it was
    assert stopped_after < patience + timeout.reply_s + timeout.connect_s + 15, stopped_after
    proxy.set("pass")  # the database is back: a worker through the same proxy finishes the run
    resumed = _worker(via, study, cwd=tmp_path)
    _, stderr = resumed.communicate(timeout=180)
    assert resumed.returncode == 0, stderr
    _assert_paid_exactly_once(postgres_url, study, budget)


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["blackhole", "drip"])
def test_runs_list_gives_up_on_a_silent_or_crawling_database_in_seconds(
    mode: Mode, postgres_url: str, proxy: FaultyProxy, tmp_path: Path
) -> None:
    proxy.set(mode)  # drip: 16 bytes every half second, so connecting alone would take many seconds
    code, _, stderr, seconds = _coevo("runs", "list", "--storage", _via(postgres_url, proxy), cwd=tmp_path, timeout=60)
    assert code == 2 and stderr.count("\n") == 1, stderr
    assert "no reply" in _one_error_line(stderr)
    assert seconds < 20, seconds  # start-up plus the read-only connect timeout (2 s), never a worker's patience


@pytest.mark.slow
@pytest.mark.postgres
def test_a_refused_database_says_refused(postgres_url: str, proxy: FaultyProxy, tmp_path: Path) -> None:
    study = _create(postgres_url, 10)
    proxy.set("refuse")
    via = _via(postgres_url, proxy)
    code, _, stderr, _ = _coevo("runs", "show", study, "--storage", via, cwd=tmp_path)
    assert code == 2 and "refused" in _one_error_line(stderr), stderr
    worker = _worker(via, study, "--db-patience", "1", "--db-timeout", "2", cwd=tmp_path)
    _, stderr = worker.communicate(timeout=60)
    line = _one_error_line(stderr)
    assert worker.returncode == 2 and "refused" in line and "--db-patience 1" in line, stderr


def test_a_server_that_does_not_know_the_user_or_database_is_not_retried(postgres_url: str) -> None:
    calls = []
    for url, kind in (
        (postgres_url.replace("postgres@", "coevo_no_such_role@"), "authentication failed"),
        (postgres_url.rsplit("/", 1)[0] + "/coevo_no_such_db", "no such database"),
    ):
        started = time.monotonic()

        def attempt(url: str = url) -> None:
            calls.append(url)
            Coordination(url, "s", SHORT)

        with pytest.raises(StorageError, match=kind):
            with_database_retry("connecting", attempt, patience_s=30, storage=url)
        assert time.monotonic() - started < 10  # stopped at once, not after 30 s of patience
    assert len(calls) == 2


# ---------------------------------------------------------------- SQLite: corrupt and read-only studies


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite study ``c`` made by a tiny random search (budget 12), closed cleanly (no -wal left)."""
    folder = tmp_path_factory.mktemp("tiny")
    path = folder / "c.sqlite3"
    # in a process of its own: when it exits, its last connection checkpoints the -wal into the file and removes it
    code, _, stderr, _ = _coevo(
        "search", "--proposer", "random", "--budget", "12", "--storage", f"sqlite:///{path}", "--study", "c", cwd=folder
    )
    assert code == 0, stderr
    assert not Path(f"{path}-wal").exists()
    return path


def _corrupt(path: Path) -> None:
    """Write 9 KB of garbage over the pages of the ``trials`` table, in the middle of the file."""
    with sqlite3.connect(path) as con:
        page = con.execute("PRAGMA page_size").fetchone()[0]
        root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'trials'").fetchone()[0]
    con.close()
    assert (root - 1) * page + 9 * 1024 < path.stat().st_size  # inside the file, not past its end
    with path.open("r+b") as f:
        f.seek((root - 1) * page)
        f.write(bytes((i * 73 + 41) % 256 for i in range(9 * 1024)))


@pytest.mark.parametrize(
    "command",
    [
        ["runs", "list"],
        ["runs", "show", "c"],
        ["search", "--proposer", "random", "--budget", "20", "--study", "c"],
        ["worker", "--study", "c", "--db-patience", "30"],
    ],
    ids=["runs-list", "runs-show", "search", "worker"],
)
def test_a_corrupt_sqlite_study_is_one_line_naming_the_file_and_the_rescue(command: list[str], tiny_study: Path, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    shutil.copy(tiny_study, path)
    _corrupt(path)
    code, _, stderr, seconds = _coevo(*command, "--storage", f"sqlite:///{path}", cwd=tmp_path)
    line = _one_error_line(stderr)
    assert code == 2 and stderr.count("\n") == 1, stderr
    assert "corrupt" in line and str(path) in line and ".recover" in line and "copy" in line, line
    assert seconds < 60  # the worker does not retry it for its patience (30 s)


def _make_read_only(*paths: Path) -> list[Path]:
    """Make ``paths`` (files and folders) read-only for this process: chmod, or for root (whom modes do not stop)
    the immutable attribute. Returns what to undo."""
    if os.geteuid() != 0:
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        return list(paths)
    done = []
    for p in paths:
        if subprocess.run(["chattr", "+i", str(p)], capture_output=True).returncode != 0:
            _undo_read_only(done)
            pytest.skip("running as root without chattr +i: a file cannot be made read-only for this process")
        done.append(p)
    return done


def _undo_read_only(paths: list[Path]) -> None:
    for p in paths:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(p)], check=True)
        else:
            p.chmod(0o755 if p.is_dir() else 0o644)


@pytest.mark.slow
@pytest.mark.parametrize("what", ["file", "folder", "folder-with-wal"])
def test_a_read_only_study_is_readable_and_a_worker_stops_at_once(what: str, tiny_study: Path, tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "c.sqlite3"
    expected = 12
    if what == "folder-with-wal":
        # the last commits are still in the -wal (a search was killed, or is still running): reading needs the -wal and -shm
        expected = _study_left_in_its_wal(path, tmp_path)
        targets = [path, Path(f"{path}-wal"), Path(f"{path}-shm"), folder]
    else:
        shutil.copy(tiny_study, path)
        targets = [path] if what == "file" else [path, folder]
    before = sorted(p.name for p in folder.iterdir())
    undo = _make_read_only(*targets)
    try:
        url = f"sqlite:///{path}"
        code, out, stderr, _ = _coevo("runs", "list", "--storage", url, "--json", cwd=tmp_path)
        assert code == 0, stderr
        assert '"study": "c"' in out and f'"evaluations": {expected}' in out, out
        code, out, stderr, _ = _coevo("runs", "show", "c", "--storage", url, "--json", cwd=tmp_path)
        assert code == 0 and f'"evaluations": {expected}' in out, stderr
        code, _, stderr, seconds = _coevo("worker", "--study", "c", "--storage", url, "--db-patience", "60", cwd=tmp_path)
        line = _one_error_line(stderr)
        assert code == 2 and "read-only" in line and f"a search needs write access to {path}" in line, stderr
        assert seconds < 45, seconds  # at once: a permanent fault is not retried for the 60 s of patience
    finally:
        _undo_read_only(undo)
    if what != "file":
        assert sorted(p.name for p in folder.iterdir()) == before  # nothing could be, or was, written beside it


def _study_left_in_its_wal(path: Path, tmp_path: Path) -> int:
    """A study whose last commits are only in its -wal: a search SIGKILLed mid-run. Returns its paid evaluations."""
    command = ["search", "--proposer", "random", "--budget", "100000", "--study", "c", "--storage", f"sqlite:///{path}"]
    search = subprocess.Popen(
        [sys.executable, "-m", "coevo.agent.cli", *command],
        cwd=tmp_path,
        env=coevo_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )

    def paid() -> int:
        assert search.poll() is None, search.communicate()
        if not path.exists():
            return 0
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as con:
            try:
                return int(con.execute("SELECT count(*) FROM trials WHERE state = 'COMPLETE'").fetchone()[0])
            except sqlite3.OperationalError:
                return 0  # the tables are not there yet

    wait_until(lambda: paid() >= 20, 120, "the search to pay 20 evaluations")
    search.kill()
    search.wait()
    assert Path(f"{path}-wal").stat().st_size > 0 and Path(f"{path}-shm").exists()
    # what a writable copy reads (SQLite replays the -wal into it): the count the read-only study must show
    copy = tmp_path / "copy"
    copy.mkdir()
    for suffix in ("", "-wal", "-shm"):
        shutil.copy(f"{path}{suffix}", copy / f"c.sqlite3{suffix}")
    return _paid(f"sqlite:///{copy / 'c.sqlite3'}", "c")


# ---------------------------------------------------------------- the classifier on real driver errors


def test_sqlite_faults_are_named_from_the_result_code(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as con:
        con.execute("CREATE TABLE t (x)")
        con.commit()
        con.execute("PRAGMA max_page_count = 2")  # the file may not grow: as good as a full disk
        with pytest.raises(sqlite3.Error) as full:
            con.execute("INSERT INTO t VALUES (zeroblob(100000))")
    with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as con, pytest.raises(sqlite3.Error) as ro:
        con.execute("INSERT INTO t VALUES (1)")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=0)) as con, pytest.raises(sqlite3.Error) as locked:
            con.execute("BEGIN IMMEDIATE")
    finally:
        holder.close()
    garbage = tmp_path / "g.sqlite3"
    garbage.write_bytes(b"not a database, " * 512)
    with contextlib.closing(sqlite3.connect(garbage)) as con, pytest.raises(sqlite3.Error) as notadb:
        con.execute("SELECT * FROM sqlite_master")
    url = f"sqlite:///{path}"
    kinds = {name: classify(e.value, url) for name, e in {"full": full, "ro": ro, "locked": locked, "notadb": notadb}.items()}
    assert {k: f.kind for k, f in kinds.items() if f} == {"full": "disk full", "ro": "read-only", "locked": "locked", "notadb": "corrupt"}
    assert [k for k, f in kinds.items() if f and f.transient] == ["locked"]  # only a lock goes away by itself
    assert str(path) in kinds["ro"].reason  # type: ignore[union-attr]


def test_an_optuna_wrapped_error_is_named_by_its_driver_cause(tiny_study: Path, tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    shutil.copy(tiny_study, path)
    _corrupt(path)
    storage = optuna.storages.RDBStorage(f"sqlite:///{path}")  # the schema's pages are intact: it opens
    with pytest.raises(optuna.exceptions.StorageInternalError, match="invalid data in the commit") as raised:
        storage.get_all_trials(storage.get_study_id_from_name("c"))  # Optuna's words say nothing of what happened
    storage.engine.dispose()
    fault = classify(raised.value, f"sqlite:///{path}")
    assert fault is not None and fault.kind == "corrupt" and str(path) in fault.reason and not fault.transient


def test_a_permanent_fault_is_not_retried_and_a_transient_one_is_until_patience(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as con:
        con.execute("CREATE TABLE t (x)")
    calls: list[str] = []

    def write_read_only() -> None:
        calls.append("ro")
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as con:
            con.execute("INSERT INTO t VALUES (1)")

    with pytest.raises(StorageError, match="read-only"):
        with_database_retry("writing", write_read_only, patience_s=30, storage=f"sqlite:///{path}")
    assert calls == ["ro"]
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")

    def write_locked() -> None:
        calls.append("locked")
        with contextlib.closing(sqlite3.connect(path, timeout=0, isolation_level=None)) as con:
            con.execute("BEGIN IMMEDIATE")

    try:
        with pytest.raises(StorageError, match=r"^locked: .*away for \d+ s while writing \(--db-patience 1\)"):
            with_database_retry("writing", write_locked, patience_s=1, storage=f"sqlite:///{path}")
    finally:
        holder.close()
    assert calls.count("locked") >= 2  # retried


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_a_retried_tell_whose_first_try_was_recorded_counts_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # a connection that drops after the commit of a tell but before its reply: the retry finds the trial told
    from coevo.search.workers import Worker, WorkerSettings

    storage = f"sqlite:///{tmp_path / 'tell.sqlite3'}"
    study = _create(storage, 5)
    problem = NB201Problem(dataset="cifar10", device="fpga")
    worker = Worker(
        problem, get_proposer("random"), storage=storage, study_name=study, seed=0, settings=WorkerSettings(heartbeat_s=1, grace_s=2)
    )
    told, failed = worker.study.ask(), worker.study.ask()
    values = problem.evaluate(problem.suggest(told))
    problem.suggest(failed)
    assert worker._tell(told, values, optuna.trial.TrialState.COMPLETE)  # the first try: recorded
    assert worker._tell(told, values, optuna.trial.TrialState.COMPLETE)  # its retry: the same result, counted once
    worker.study.tell(failed, state=optuna.trial.TrialState.FAIL)  # another worker failed it as stale meanwhile
    with caplog.at_level("WARNING", logger="coevo.search.workers"):
        assert not worker._tell(failed, values, optuna.trial.TrialState.COMPLETE)
    assert "another worker failed it as stale" in caplog.text and "FAIL" in caplog.text
    states = Counter(t.state.name for t in optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False))
    assert states == {"COMPLETE": 1, "FAIL": 1}
