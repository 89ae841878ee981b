"""Opening Optuna storage from a URL, with errors a person can act on."""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import sqlite3
import threading
import time
import urllib.parse
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import optuna
import sqlalchemy
import sqlalchemy.exc
from sqlalchemy import event

from coevo.search import pg_bounds
from coevo.search.db_errors import classify, sqlite_fault
from coevo.search.errors import StorageError, StorageMissingError

DEFAULT_STORAGE = "sqlite:///runs/coevo.sqlite3"
"""Default storage: a SQLite file under ./runs/ (created on first use)."""
DEFAULT_FOLDER = Path("runs")
"""coevo's own folder (relative to the working folder): SQLite files named in it are created with it."""


@dataclass(frozen=True)
class DatabaseTimeouts:
    """How long any one wait on the database may last: every bound is derived from ``request_s``.

    A worker retries a request that failed within these bounds for ``--db-patience`` seconds
    (:class:`search.workers.WorkerSettings`); read-only commands use :data:`READ_TIMEOUTS` and
    do not retry. So no wait is unbounded: a refused or silent server, a dropped or half-open
    connection, a stuck statement and a locked SQLite file all end as an error.

    Attributes:
        request_s: seconds one request may take (``--db-timeout``).
    """

    request_s: float = 30.0

    @property
    def connect_s(self) -> int:
        """libpq ``connect_timeout`` (whole seconds; libpq takes nothing below 2)."""
        return max(2, math.ceil(self.request_s / 3))

    @property
    def statement_s(self) -> float:
        """PostgreSQL ``statement_timeout``: the server cancels a statement (or a lock wait) running longer."""
        return self.request_s

    @property
    def reply_s(self) -> float:
        """Client-side: a wait that hears nothing from the server this long drops the connection (past the
        statement timeout, so a slow statement is cancelled by the server first, with its own message)."""
        return self.request_s + max(2.0, self.request_s / 5)

    @property
    def idle_in_transaction_s(self) -> float:
        """PostgreSQL ``idle_in_transaction_session_timeout``: the server ends a session that stopped mid-transaction
        (a worker cut off by a partition), so the row locks it holds do not stall the other workers."""
        return 2 * self.request_s

    @property
    def busy_s(self) -> float:
        """SQLite busy timeout: how long a connection waits for another process's lock."""
        return self.request_s

    def postgres_connect_args(self, url: str) -> dict[str, Any]:
        """libpq parameters (psycopg ``connect_args``) carrying these bounds; what the URL sets itself wins."""
        keepalive_s = max(1, round(self.request_s / 3))
        ours: dict[str, Any] = {
            "connect_timeout": self.connect_s,
            "keepalives": 1,
            "keepalives_idle": keepalive_s,
            "keepalives_interval": max(1, round(self.request_s / 10)),
            "keepalives_count": 3,
            "tcp_user_timeout": int(self.reply_s * 1000),  # milliseconds: unacknowledged data this long drops the connection
        }
        query = sqlalchemy.engine.make_url(url).query
        args = {k: v for k, v in ours.items() if k not in query}
        # the URL's (or PGOPTIONS') own settings come last, so they win
        given = query.get("options", os.environ.get("PGOPTIONS", ""))
        given = given if isinstance(given, str) else " ".join(given)
        statement_ms, idle_ms = int(self.statement_s * 1000), int(self.idle_in_transaction_s * 1000)
        settings = f"-c statement_timeout={statement_ms} -c idle_in_transaction_session_timeout={idle_ms}"
        args["options"] = f"{settings} {given}".strip()
        if url.startswith("postgresql+psycopg://"):
            pg_bounds.install()
            args[pg_bounds.REPLY_KEY] = self.reply_s
        return args


READ_TIMEOUTS = DatabaseTimeouts(request_s=5.0)
"""Bounds of read-only callers (``coevo runs``, reports): they give up after seconds, not a worker's patience."""


def resolve_storage_url(url: str | None) -> str:
    """The URL to open: ``url``, or :data:`DEFAULT_STORAGE` when None.

    ``postgresql://`` URLs are routed to the psycopg 3 driver that coevo installs.
    """
    url = url or DEFAULT_STORAGE
    if url.startswith("postgresql://") and importlib.util.find_spec("psycopg2") is None:
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return url


MEMORY: Literal["memory"] = "memory"
"""What :func:`sqlite_target` answers for an in-memory SQLite database."""


def sqlite_target(url: str) -> Path | Literal["memory"] | None:
    """What a SQLite URL really opens: its file (relative paths are from the working folder), or :data:`MEMORY`.

    Read as SQLAlchemy and SQLite read it, so a check on this path is a check on the file that
    is opened: ``sqlite:///PATH`` (its query left out; its ``..`` taken away by name, as
    SQLAlchemy does before SQLite sees the path, not after symlinks), and SQLite's own URI form
    ``sqlite:///file:PATH?mode=...&uri=true`` (``file:///PATH``, ``file://localhost/PATH`` and
    percent-escapes included). None: not a SQLite URL, or one SQLAlchemy cannot read (it opens nothing).

    >>> sqlite_target("sqlite:///runs/a.sqlite3?timeout=5"), sqlite_target("sqlite:///file:/data/b.db?mode=rw&uri=true")
    (PosixPath('runs/a.sqlite3'), PosixPath('/data/b.db'))
    >>> sqlite_target("sqlite:///:memory:"), sqlite_target("sqlite:///file::memory:?uri=true"), sqlite_target("postgresql://h/db")
    ('memory', 'memory', None)
    """
    if url.split("://", 1)[0].split("+", 1)[0] != "sqlite":
        return None
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except (sqlalchemy.exc.ArgumentError, ValueError):
        return None
    database = parsed.database or ""
    if not sqlalchemy.util.asbool(parsed.query.get("uri", False)):
        # SQLAlchemy opens os.path.abspath(PATH): runs/link/../x is ./runs/x whatever runs/link points to
        return Path(os.path.normpath(database)) if database not in ("", ":memory:") else MEMORY
    return _sqlite_uri_target(database, dict(parsed.query))


def _sqlite_uri_target(database: str, query: Mapping[str, Any]) -> Path | Literal["memory"]:
    """The file (or :data:`MEMORY`) a SQLite URI filename opens (https://sqlite.org/uri.html); ``query``: the URL's parameters."""
    if not database.startswith("file:"):
        return Path(database) if database not in ("", ":memory:") else MEMORY  # not a URI: an ordinary file name
    rest = database.removeprefix("file:")
    path, _, params = rest.partition("?")
    path = path.partition("#")[0]
    if path.startswith("//"):
        authority, slash, tail = path[2:].partition("/")
        # SQLite opens only an empty or "localhost" authority; keep any other so a check sees a path that is nowhere
        path = slash + tail if authority in ("", "localhost") else path
    path = urllib.parse.unquote(path).partition("\x00")[0]  # SQLite ignores the rest of a path after %00
    modes = [v for k, v in urllib.parse.parse_qsl(params) if k == "mode"] + [str(v) for k, v in query.items() if k == "mode"]
    if path in ("", ":memory:") or "memory" in modes:
        return MEMORY
    return Path(path)


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL opens (see :func:`sqlite_target`), or None for other URLs and in-memory databases."""
    target = sqlite_target(url)
    return target if isinstance(target, Path) else None


def open_storage(
    url: str | None, *, create: bool = True, timeouts: DatabaseTimeouts | None = None, **rdb_options: Any
) -> optuna.storages.RDBStorage:
    """Open (and create tables in) the storage at ``url``.

    The default SQLite file's folder is created; a user-given SQLite path must be in an
    existing folder, so a typo does not silently create a new tree. ``rdb_options`` go to
    ``optuna.storages.RDBStorage`` (e.g. heartbeats for workers).

    Args:
        url: the storage URL (None: :data:`DEFAULT_STORAGE`).
        create: False for read-only callers (listing, reports): a storage that holds no
            studies yet is an error and nothing is created (no file, no tables). A SQLite file
            that cannot be written (or whose folder cannot) is opened read-only either way:
            reads work, a write fails as "read-only" (writers call :func:`require_writable` first).
        timeouts: bounds on each wait (default: :data:`READ_TIMEOUTS` when ``create`` is False,
            else :class:`DatabaseTimeouts`'s).

    Raises:
        StorageError: the URL is malformed, its driver is missing, or it cannot be reached (the
            message names what happened: refused, no reply, corrupt, read-only, ...); with
            ``create=False``, also when nothing is stored there yet.
    """
    resolved = resolve_storage_url(url)
    timeouts = timeouts or (READ_TIMEOUTS if not create else DatabaseTimeouts())
    if not create:
        check_exists(url, timeouts=timeouts)
    path = _sqlite_folder_ready(url, resolved)
    read_only = path is not None and sqlite_read_only(path)
    engine_kwargs = engine_options(resolved, timeouts, read_only=read_only)
    try:
        storage = _rdb_storage(resolved, engine_kwargs, rdb_options)
        if path is not None and not read_only:
            _tune_sqlite(storage.engine)
        _opened(storage.engine, resolved)
        return storage
    except (sqlalchemy.exc.SQLAlchemyError, ValueError, ImportError) as exc:
        raise _storage_error(url, resolved, exc) from exc


def _rdb_storage(resolved: str, engine_kwargs: dict[str, Any], rdb_options: dict[str, Any]) -> optuna.storages.RDBStorage:
    """Optuna's storage, retried while another process is creating the same schema.

    Processes opening a new database together race to create its tables and version row; the
    loser fails with "already exists" or a duplicate version row, and a moment later the schema
    is there. Three tries: one failure can follow another (tables, then the version row).
    """
    for attempt in range(3):
        try:
            return optuna.storages.RDBStorage(resolved, engine_kwargs=engine_kwargs, **rdb_options)
        except (sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError) as exc:
            if attempt == 2 or ("already exists" not in str(exc) and "alembic_version" not in str(exc)):
                raise
            time.sleep(0.1 * (attempt + 1))
    raise AssertionError("unreachable")


def shown_url(url: str | None) -> str:
    """A storage URL as messages show it: as given (None: the default), its password masked (a SQLite URL has none).

    The one masking rule for messages, chat's system prompt, the call policy and ``bench.json``.
    """
    given = url or DEFAULT_STORAGE
    if sqlite_target(given) is not None:
        return given
    try:
        parsed = sqlalchemy.engine.make_url(given)
    except (sqlalchemy.exc.ArgumentError, ValueError):
        return given
    return parsed.render_as_string(hide_password=True) if parsed.password is not None else given


def _storage_error(url: str | None, resolved: str, exc: BaseException) -> StorageError:
    """One line for a storage that failed to open: what happened (:func:`search.db_errors.classify`), or the driver's words."""
    fault = classify(exc, resolved)
    if fault is not None:
        return StorageError(f"cannot open storage {shown_url(url)!r}: {fault.reason}")
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StorageError(
        f"cannot open storage {shown_url(url)!r}: {reason}. Use sqlite:///PATH or postgresql://USER@HOST/DB with a reachable server"
    )


def require_writable(url: str | None) -> None:
    """Raise :class:`StorageError` ("read-only") when ``url`` is a SQLite file this process cannot write (searches and
    workers call it first: they would fail at their first write)."""
    path = sqlite_path(resolve_storage_url(url))
    if path is not None and sqlite_read_only(path):
        fault = sqlite_fault("read-only", str(path), "the file or its folder is not writable for this user")
        raise StorageError(f"cannot open storage {shown_url(url)!r}: {fault.reason}")


def check_exists(url: str | None, *, timeouts: DatabaseTimeouts = READ_TIMEOUTS) -> None:
    """Raise :class:`StorageError` unless the storage at ``url`` already holds Optuna's tables (creates nothing)."""
    resolved = resolve_storage_url(url)
    path = sqlite_path(resolved)
    shown = url or DEFAULT_STORAGE
    if path is not None:
        if not path.is_file():
            # "pass --storage" only to someone who did not: a wrong path given is to be checked, not given again
            hint = "run a search first, or pass --storage" if url is None else "check the path, or run a search that writes there first"
            raise StorageMissingError(f"no storage at {shown!r}: {str(path)!r} does not exist ({hint})")
        return
    if sqlite_target(resolved) == MEMORY:
        raise StorageMissingError(f"{shown} is an in-memory database and holds nothing to read; pass the storage a search wrote to")
    try:
        engine = sqlalchemy.create_engine(resolved, **engine_options(resolved, timeouts, read_only=True))
        try:
            with engine.connect() as conn:
                present = sqlalchemy.inspect(conn).has_table("studies")
        finally:
            engine.dispose()
    except (sqlalchemy.exc.SQLAlchemyError, ValueError, ImportError) as exc:
        raise _storage_error(url, resolved, exc) from exc
    if not present:
        raise StorageMissingError(f"no coevo studies in {shown!r} (it has no Optuna tables yet): run a search there first")


def engine_options(resolved: str, timeouts: DatabaseTimeouts, *, read_only: bool = False) -> dict[str, Any]:
    """``create_engine`` keyword arguments that bound every wait on the database at ``resolved`` by ``timeouts``.

    SQLite files wait ``busy_s`` for another process's lock (``read_only``: the file is opened
    read-only, see :func:`sqlite_read_only`); PostgreSQL gets libpq's connect timeout, TCP
    keepalives, ``tcp_user_timeout``, the server's statement and idle-in-transaction timeouts,
    and (psycopg 3) the client-side reply bound of :mod:`search.pg_bounds`; pooled
    connections are pinged before use.
    """
    if resolved == "sqlite:///:memory:":
        return {"poolclass": sqlalchemy.pool.StaticPool, "connect_args": {"check_same_thread": False}}
    path = sqlite_path(resolved)
    if path is not None:
        if read_only:
            return {"creator": _read_only_sqlite(path, timeouts.busy_s)}
        return {"connect_args": {"timeout": timeouts.busy_s}}
    if resolved.startswith(("postgresql://", "postgresql+")):
        return {"pool_pre_ping": True, "connect_args": timeouts.postgres_connect_args(resolved)}
    return {"pool_pre_ping": True}


def sqlite_read_only(path: Path) -> bool:
    """Whether SQLite file ``path`` exists but cannot be written: the file, or its folder (where SQLite keeps the
    ``-wal``/``-shm`` files a write needs) unless those exist and are writable."""
    if not path.is_file():
        return False
    if not os.access(path, os.W_OK):
        return True
    if os.access(path.parent, os.W_OK):
        return False
    return not all(os.access(f"{path}{suffix}", os.W_OK) for suffix in ("-wal", "-shm"))


def _read_only_sqlite(path: Path, busy_s: float) -> Callable[[], sqlite3.Connection]:
    """A connect function opening ``path`` read-only (``mode=ro``).

    A WAL-mode file is read through its ``-shm`` file, which SQLite creates beside it if
    missing: in a folder that cannot be written, with no ``-wal`` file left (every writer
    closed cleanly), the file is opened ``immutable`` instead, which needs neither. (With a
    ``-wal`` file there, its ``-shm`` must be there too, as a writer leaves them.)
    """
    immutable = not os.access(path.parent, os.W_OK) and not Path(f"{path}-wal").exists()
    uri = path.resolve().as_uri() + "?mode=ro" + ("&immutable=1" if immutable else "")

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=busy_s, check_same_thread=False)

    return connect


def _sqlite_folder_ready(url: str | None, resolved: str, *, create: bool = True) -> Path | None:
    """The SQLite file path (None for other URLs): the default folder (``./runs/``) is created (``create``), any other must exist."""
    path = sqlite_path(resolved)
    if path is not None:
        if url is None or path.parent == DEFAULT_FOLDER:
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.parent.is_dir():
            raise StorageError(f"cannot open storage {url!r}: folder {str(path.parent)!r} does not exist; create it or pick another path")
    return path


def check_openable(url: str | None) -> None:
    """Raise what opening ``url`` for a search would raise (a malformed URL, a server that does not answer, a SQLite
    path in a missing folder, a damaged file), creating nothing: a new SQLite file is made later, with the study.

    For the checks a command runs before its own (its proposer's ``--kb-from``, its reasoner's endpoint): a bad
    storage is the first line the user reads, and a command refused afterwards leaves no new file behind.

    Raises:
        StorageError: as :func:`open_storage`.
    """
    resolved = resolve_storage_url(url)
    path = _sqlite_folder_ready(url, resolved, create=False)
    if path is not None and not path.exists():
        return
    with contextlib.suppress(StorageMissingError):  # a database without coevo's tables yet: the search creates them
        open_storage(url, create=False)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        # SQLAlchemy emits BEGIN itself (see _begin_immediate), not the driver
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # WAL lets readers (a report, `coevo runs`) run beside a writer, and NORMAL sync
        # drops an fsync per commit: a 300-trial search goes from ~26 s to ~7 s here.
        # A power cut may lose the last commits, never corrupt the file; a resumed search
        # re-evaluates what was lost.
        # WAL is a property of the file: set it once. Setting it needs a lock that a writer in
        # another process may hold, so never ask again once it is on.
        for attempt in range(50):
            if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() == "wal":
                break
            try:
                cursor.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError:
                # another process holds a lock (it may be switching the file itself): the
                # pragma does not wait on the busy timeout, so wait here, briefly
                if attempt == 49:
                    raise
                time.sleep(0.1)
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


def _begin_immediate(connection: sqlalchemy.engine.Connection) -> None:
    # A deferred transaction that reads, then writes after another process committed, fails
    # at once with "database is locked" in WAL mode (its snapshot is stale; the busy timeout
    # is not consulted). Taking the write lock at BEGIN makes writers queue on the timeout.
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def _tune_sqlite(engine: sqlalchemy.engine.Engine) -> None:
    event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "begin", _begin_immediate)
    engine.dispose()  # connections opened while creating tables predate the listeners
    with engine.connect():
        pass  # switch the file to WAL now, before other processes (bench workers) open it


def side_engine(
    url: str | None,
    metadata: sqlalchemy.MetaData,
    *,
    busy_timeout_s: float | None = None,
    timeouts: DatabaseTimeouts | None = None,
    create: bool = True,
) -> sqlalchemy.engine.Engine:
    """An engine on the study's database for coevo's own tables (caches), created if missing.

    Every wait is bounded by ``timeouts`` (default :class:`DatabaseTimeouts`'s); SQLite files
    get the same pragmas as the study and wait up to ``busy_timeout_s`` (default: the
    timeouts' ``busy_s``) for another writer's lock. A SQLite file that cannot be written is
    opened read-only (reads work; a write fails as "read-only"). An in-memory URL gets one
    shared connection (else every connection would see a new, empty database).
    ``create=False`` (readers) creates no table; the caller checks that its table is there
    (:func:`has_table`).
    """
    resolved = resolve_storage_url(url)
    timeouts = timeouts or DatabaseTimeouts()
    path = _sqlite_folder_ready(url, resolved)
    if busy_timeout_s is not None and path is not None:
        timeouts = DatabaseTimeouts(request_s=busy_timeout_s)  # on SQLite the busy timeout is the only bound
    read_only = path is not None and sqlite_read_only(path)
    engine = sqlalchemy.create_engine(resolved, **engine_options(resolved, timeouts, read_only=read_only))
    _opened(engine, resolved)
    if path is not None and not read_only:
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _begin_immediate)
    if not create:
        return engine
    try:
        try:
            metadata.create_all(engine, checkfirst=True)
        except sqlalchemy.exc.OperationalError as exc:
            if "already exists" not in str(exc):
                raise
            metadata.create_all(engine, checkfirst=True)  # another process won the race: the tables exist now
    except sqlalchemy.exc.SQLAlchemyError as exc:
        fault = classify(exc, resolved)
        reason = fault.reason if fault is not None else str(exc).splitlines()[0]
        raise StorageError(f"cannot use storage {url!r} for coevo's tables: {reason}") from exc
    return engine


_engines: weakref.WeakSet[sqlalchemy.engine.Engine] = weakref.WeakSet()
_engines_lock = threading.Lock()


def _opened(engine: sqlalchemy.engine.Engine, resolved: str) -> None:
    """Note ``engine`` for :func:`closing_idle_connections` (weakly: the note keeps nothing alive).

    In-memory SQLite databases are not noted, whatever pool SQLAlchemy gave them (a shared-cache
    ``file::memory:`` URI gets a queue pool): closing their last connection deletes the database.
    """
    if sqlite_target(resolved) == MEMORY:
        return
    with _engines_lock:
        _engines.add(engine)


@contextmanager
def closing_idle_connections() -> Iterator[None]:
    """When the block ends, close the pooled connections of every engine coevo opened that has none in use.

    Why: Optuna's storages and SQLAlchemy's engines sit in reference cycles, so an engine no
    longer used is freed, and its pool's connections closed, only when Python's cycle collector
    runs. A process that runs search after search (a chat session, the Python API in a loop)
    kept about five PostgreSQL connections per search open until then, towards the server's
    ``max_connections``. Every idle engine is disposed, not only those opened in the block:
    cached ones (the knowledge store's) are used by every search. Disposing only empties a pool
    (an engine used again connects again). An engine with a connection checked out (another
    thread's search) is left to that search's own end: disposing it would orphan the
    connection, which then stays open until a collection.
    """
    try:
        yield
    finally:
        with _engines_lock:
            engines = list(_engines)
        for engine in engines:
            in_use = getattr(engine.pool, "checkedout", lambda: 0)()
            if not in_use:
                engine.dispose()


def has_table(engine: sqlalchemy.engine.Engine, name: str) -> bool:
    """Whether the database of ``engine`` holds table ``name`` (a SQLite file that does not exist is not created: False)."""
    path = sqlite_path(engine.url.render_as_string(hide_password=False))
    if path is not None and not path.is_file():
        return False
    try:
        with engine.connect() as conn:
            return sqlalchemy.inspect(conn).has_table(name)
    except sqlalchemy.exc.SQLAlchemyError as exc:
        raise StorageError(f"cannot read storage {engine.url.render_as_string(hide_password=True)!r}: {str(exc).splitlines()[0]}") from exc


def lock_row(
    conn: sqlalchemy.engine.Connection, table: sqlalchemy.Table, key: Mapping[str, Any], *, touch: str, defaults: Mapping[str, Any]
) -> None:
    """Hold the write lock of ``table``'s row ``key`` for the rest of ``conn``'s transaction, creating it if missing.

    Touching the row (``SET touch = touch``) takes its row lock on PostgreSQL; SQLite already
    holds the database lock from BEGIN IMMEDIATE. Writers of the same row thus queue here,
    which makes a read-then-write transaction safe. A row created by a concurrent writer
    between our update and our insert is touched again.
    """
    where = [table.c[name] == value for name, value in key.items()]
    touch_row = table.update().where(*where).values({touch: table.c[touch]})
    if conn.execute(touch_row).rowcount:
        return
    try:
        with conn.begin_nested():
            conn.execute(table.insert().values(**key, **defaults))
    except sqlalchemy.exc.IntegrityError:
        conn.execute(touch_row)
