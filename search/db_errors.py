"""What went wrong with the database, in one line: a driver exception to a kind and a reason.

One classifier for every caller (``open_storage``, the worker's retry loop, the command line):
:func:`classify` walks an exception's chain (SQLAlchemy wraps the driver's error, Optuna wraps
SQLAlchemy's in ``StorageInternalError("... invalid data in the commit ...")``, which says
nothing) down to the driver's own error, and reads what it carries: SQLite's result code,
PostgreSQL's SQLSTATE, libpq's connection message, an ``errno``.

Transient kinds (the database may come back: refused, no reply, dropped, locked, a timed-out
statement, a server restarting or out of connection slots) are retried by workers for
``--db-patience`` seconds. Permanent kinds stop at once: retrying cannot help a corrupt or
read-only file, a wrong password, a database that does not exist, or a full disk (a disk does
not empty itself; the message says to free space and rerun, and nothing is lost).
"""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

TRANSIENT_KINDS = frozenset(
    {"refused", "no reply", "dropped", "unreachable", "locked", "statement timeout", "restarting", "busy server", "conflict"}
)
"""Kinds a worker retries (for ``--db-patience`` seconds); every other kind stops it at once."""


@dataclass(frozen=True)
class DatabaseFault:
    """What happened to a database request.

    Attributes:
        kind: a short name ("refused", "no reply", "corrupt", "read-only", ...).
        reason: one line that starts with the kind and says what happened and what to do.
    """

    kind: str
    reason: str

    @property
    def transient(self) -> bool:
        """Whether retrying may help (see :data:`TRANSIENT_KINDS`)."""
        return self.kind in TRANSIENT_KINDS


def classify(exc: BaseException, storage: str | None = None) -> DatabaseFault | None:
    """The fault behind ``exc``, or None when nothing in its chain is a database error.

    An error in the chain that carries its own ``fault`` attribute (coevo's reply bound,
    :mod:`search.pg_bounds`) is taken at its word.

    Args:
        exc: what was raised (any wrapping: SQLAlchemy, Optuna, coevo's StorageError).
        storage: the storage URL, to name the file or server in the reason.
    """
    where = _where(storage)
    in_database = False  # an OSError counts only below a database layer's error (else it is a file's, a pipe's...)
    for e in _chain(exc):
        fault = getattr(e, "fault", None)
        if isinstance(fault, DatabaseFault):
            return fault
        if isinstance(e, sqlite3.Error):
            return _sqlite_fault(e, where)
        module = type(e).__module__
        if module.startswith(("psycopg", "psycopg2")) and isinstance(e, Exception):
            return _postgres_fault(e, where)
        in_database = in_database or module.startswith(("sqlalchemy", "optuna"))
        if in_database and isinstance(e, OSError) and e.errno is not None:
            found = _os_fault(e, where)
            if found is not None:
                return found
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then what caused it, down to the driver (``__cause__``, ``__context__``, SQLAlchemy's ``orig``)."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        for nxt in (getattr(e, "orig", None), e.__cause__, e.__context__):
            if isinstance(nxt, BaseException):
                todo.append(nxt)


def _where(storage: str | None) -> str:
    """The file of a SQLite URL, or ``host:port/database`` of a server URL (no password), for messages."""
    if not storage:
        return "the database"
    try:
        url = make_url(storage)
    except Exception:  # a malformed URL is reported elsewhere; name it as given
        return storage
    if url.get_backend_name() == "sqlite":
        return url.database or "the database"
    return f"{url.host or 'localhost'}:{url.port or 5432}/{url.database or ''}"


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0].strip() if text else type(e).__name__


# ---------------------------------------------------------------- SQLite

_SQLITE = {  # primary result codes (https://sqlite.org/rescode.html)
    3: "permission denied",  # SQLITE_PERM
    5: "locked",  # SQLITE_BUSY
    6: "locked",  # SQLITE_LOCKED
    8: "read-only",  # SQLITE_READONLY
    10: "I/O error",  # SQLITE_IOERR
    11: "corrupt",  # SQLITE_CORRUPT
    13: "disk full",  # SQLITE_FULL
    14: "cannot open",  # SQLITE_CANTOPEN
    15: "locked",  # SQLITE_PROTOCOL: a WAL lock race, gone on retry
    23: "permission denied",  # SQLITE_AUTH
    26: "corrupt",  # SQLITE_NOTADB
}


def _sqlite_kind(e: sqlite3.Error) -> str | None:
    code = getattr(e, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in _SQLITE:
        return _SQLITE[code & 0xFF]
    text = str(e).lower()
    # coevo writes UTF-8 text only: text that does not decode is damage, like a malformed page
    if "malformed" in text or "not a database" in text or "could not decode to utf-8" in text:
        return "corrupt"
    if "locked" in text:
        return "locked"
    if "readonly" in text or "read-only" in text:
        return "read-only"
    return None


def sqlite_fault(kind: str, file: str, detail: str) -> DatabaseFault:
    """The fault of kind ``kind`` on SQLite file ``file``, with what to do about it."""
    reasons = {
        "corrupt": f"{file} is damaged ({detail}); rescue what it holds with `sqlite3 {file} .recover | sqlite3 {file}.recovered` "
        f"and use that file, or restore {file} from a copy",
        "read-only": f"{file} cannot be written ({detail}; a search needs write access to {file} and its folder)",
        "disk full": f"no space left for {file} ({detail}); free some space, then rerun the same command (nothing is lost)",
        "locked": f"{file} stayed locked by another process past the busy timeout ({detail})",
        "cannot open": (
            f"{file} is a folder; give a file path, e.g. sqlite:///{file.rstrip('/')}/coevo.sqlite3"
            if Path(file).is_dir()
            else f"cannot open {file} ({detail}); check that it and its folder exist and can be read"
        ),
        "permission denied": f"no permission to use {file} ({detail}); check its owner and mode",
        "I/O error": f"the disk failed reading or writing {file} ({detail}); check the disk and its file system",
    }
    return DatabaseFault(kind, f"{kind}: {reasons.get(kind, detail)}")


def _sqlite_fault(e: sqlite3.Error, file: str) -> DatabaseFault:
    kind = _sqlite_kind(e)
    detail = _first_line(e)
    if kind is None:
        return DatabaseFault("error", f"SQLite error on {file}: {detail}")
    return sqlite_fault(kind, file, detail)


# ---------------------------------------------------------------- PostgreSQL

_SQLSTATE = {  # https://www.postgresql.org/docs/current/errcodes-appendix.html
    "28P01": "authentication failed",
    "28000": "authentication failed",
    "3D000": "no such database",
    "53100": "disk full",
    "53200": "busy server",  # out of memory
    "53300": "busy server",  # too many connections
    "57014": "statement timeout",  # query_canceled: statement_timeout, lock_timeout
    "25P03": "dropped",  # idle_in_transaction_session_timeout
    "57P01": "restarting",  # admin_shutdown
    "57P02": "restarting",  # crash_shutdown
    "57P03": "restarting",  # cannot_connect_now
    "40001": "conflict",  # serialization_failure
    "40P01": "conflict",  # deadlock_detected
    "25006": "read-only",  # read_only_sql_transaction: a standby
    "42501": "permission denied",
}

_LIBPQ = (  # connection failures carry no SQLSTATE: libpq's message says what happened (all words must be in it)
    (("connection refused",), "refused"),
    (("timeout expired",), "no reply"),
    (("password authentication failed",), "authentication failed"),
    (("authentication failed",), "authentication failed"),
    (("no password supplied",), "authentication failed"),
    (('role "', "does not exist"), "authentication failed"),
    (('database "', "does not exist"), "no such database"),
    (("failed to resolve host",), "unknown host"),
    (("could not translate host name",), "unknown host"),
    (("name or service not known",), "unknown host"),
    (("starting up",), "restarting"),
    (("shutting down",), "restarting"),
    (("recovery mode",), "restarting"),
    (("too many clients",), "busy server"),
    (("remaining connection slots",), "busy server"),
    (("no route to host",), "unreachable"),
    (("network is unreachable",), "unreachable"),
    (("server closed the connection",), "dropped"),
    (("consuming input failed",), "dropped"),
    (("connection is lost",), "dropped"),
    (("connection is closed",), "dropped"),
    (("connection is bad",), "dropped"),
    (("terminating connection",), "dropped"),
    (("ssl syscall error",), "dropped"),
    (("eof detected",), "dropped"),
    (("connection reset",), "dropped"),
    (("broken pipe",), "dropped"),
)


def _postgres_kind(e: BaseException) -> str:
    state = getattr(e, "sqlstate", None) or getattr(e, "pgcode", None)
    if isinstance(state, str):
        if state in _SQLSTATE:
            return _SQLSTATE[state]
        if state.startswith("08"):
            return "dropped"
    text = str(e).lower()
    for needles, kind in _LIBPQ:
        if all(n in text for n in needles):
            return kind
    # an operational error not recognised above: a server or network problem, worth a retry
    return "unreachable" if type(e).__name__ in ("OperationalError", "InterfaceError") else "error"


def _postgres_fault(e: BaseException, where: str) -> DatabaseFault:
    kind = _postgres_kind(e)
    detail = " ".join(_first_line(e).split())
    for prefix in ("connection failed: ",):
        detail = detail.removeprefix(prefix)
    reasons = {
        "refused": f"the server at {where} refused the connection (is PostgreSQL running there, on that port?)",
        "no reply": f"the database server at {where} did not answer ({detail})",
        "dropped": f"the connection to {where} was dropped ({detail})",
        "unreachable": f"{where} cannot be reached ({detail})",
        "authentication failed": f"{where} refused the user ({detail}); check the user and password in the URL (or ~/.pgpass)",
        "no such database": f"{where} has no such database ({detail}); create it (createdb) or fix the URL",
        "unknown host": f"{detail}; check the host name in the storage URL",
        "disk full": f"the server at {where} has no disk space left ({detail}); free some, then rerun (nothing is lost)",
        "statement timeout": f"a statement on {where} ran past its time limit and was cancelled ({detail})",
        "restarting": f"the server at {where} is restarting or shutting down ({detail})",
        "busy server": f"the server at {where} has no room for this connection ({detail})",
        "conflict": f"a transaction on {where} conflicted with another ({detail})",
        "read-only": f"{where} accepts no writes ({detail}): a search needs a writable primary server",
        "permission denied": f"the user may not do this on {where} ({detail}); grant it the rights",
    }
    if kind == "error":
        return DatabaseFault("error", f"database error on {where}: {detail}")
    return DatabaseFault(kind, f"{kind}: {reasons[kind]}")


# ---------------------------------------------------------------- the operating system

_ERRNO = {
    errno.ECONNREFUSED: "refused",
    errno.ETIMEDOUT: "no reply",
    errno.ECONNRESET: "dropped",
    errno.EPIPE: "dropped",
    errno.EHOSTUNREACH: "unreachable",
    errno.ENETUNREACH: "unreachable",
    errno.ENOSPC: "disk full",
    errno.EROFS: "read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def _os_fault(e: OSError, where: str) -> DatabaseFault | None:
    kind = _ERRNO.get(e.errno or 0)
    if kind is None:
        return None
    return DatabaseFault(kind, f"{kind}: {where}: {_first_line(e)}")
