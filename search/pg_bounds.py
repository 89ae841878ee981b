"""Client-side bounds on PostgreSQL connections (psycopg 3): no wait on the server outlasts its bound.

libpq's ``connect_timeout`` bounds connecting, TCP keepalives and ``tcp_user_timeout`` find a
peer that vanished, and the server's ``statement_timeout`` cancels a stuck query. None of them
helps when the peer's TCP stack stays up but nothing answers: a proxy or load balancer in
front of a dead server, a server frozen mid-request, a link that passes ACKs but no data.
Then a query waits forever. A connection made here arms a watchdog around every wait on the
server (queries, commits, rollbacks, the pool's ping); a wait that is not answered within its bound
has its socket shut down, and fails as "no reply" (a dropped connection, which the pool
discards and a worker retries). The bound is on the whole wait (a request and its reply), so
a link that crawls (a few bytes a second) ends the same way.

The hook is a SQLAlchemy ``do_connect`` listener on psycopg's dialect; it acts only on engines
whose ``connect_args`` carry :data:`REPLY_KEY` (those :mod:`search.storage` makes), so other
engines in the process are left alone.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import socket
import threading
import time
from contextlib import suppress
from typing import Any

from sqlalchemy import event

from coevo.search.db_errors import DatabaseFault

REPLY_KEY = "coevo_reply_s"
"""``connect_args`` key with the reply bound in seconds (removed before psycopg sees the arguments)."""


class _Watchdog:
    """One daemon thread that shuts down the socket of a wait that ran past its deadline."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: dict[int, tuple[float, int]] = {}  # token -> (deadline, socket fd)
        self._fired: set[int] = set()
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None
        self._wake_at = math.inf

    def arm(self, fd: int, bound_s: float) -> int:
        """Watch socket ``fd`` for ``bound_s`` seconds; returns the token to :meth:`disarm` with."""
        deadline = time.monotonic() + bound_s
        with self._cond:
            token = next(self._tokens)
            self._armed[token] = (deadline, fd)
            if self._thread is None:  # the first wait watched
                self._thread = threading.Thread(target=self._run, name="coevo-db-watchdog", daemon=True)
                self._thread.start()
            if deadline < self._wake_at:
                self._cond.notify()
        return token

    def disarm(self, token: int) -> bool:
        """Stop watching; True when the bound had passed and the socket was shut down."""
        with self._cond:
            self._armed.pop(token, None)
            if token in self._fired:
                self._fired.discard(token)
                return True
            return False

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for token, (deadline, fd) in list(self._armed.items()):
                    if deadline <= now:
                        # under the lock: the wait cannot return (and its fd be reused) before this ends
                        del self._armed[token]
                        self._fired.add(token)
                        _shut_down(fd)
                self._wake_at = min((d for d, _ in self._armed.values()), default=math.inf)
                self._cond.wait(None if self._wake_at == math.inf else self._wake_at - now)


def _shut_down(fd: int) -> None:
    """Shut the socket behind ``fd`` down both ways: the waiting libpq call sees the connection end."""
    with suppress(OSError):
        dup = socket.socket(fileno=os.dup(fd))
        try:
            dup.shutdown(socket.SHUT_RDWR)
        finally:
            dup.close()


_WATCHDOG = _Watchdog()


def _new_watchdog_after_fork() -> None:
    # a forked child has no watchdog thread, and its lock may have been held at the fork
    global _WATCHDOG
    _WATCHDOG = _Watchdog()


os.register_at_fork(after_in_child=_new_watchdog_after_fork)
_INSTALLED = threading.Lock()
_installed = False


def install() -> None:
    """Hook psycopg's SQLAlchemy dialect, once per process (before the first engine connects)."""
    global _installed
    with _INSTALLED:
        if _installed:
            return
        from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

        event.listen(PGDialect_psycopg, "do_connect", _connect)
        _installed = True


def _connect(dialect: Any, record: Any, cargs: list[Any], cparams: dict[str, Any]) -> Any:
    """Open a bounded connection for an engine that asked for one (None: SQLAlchemy connects as usual)."""
    reply_s = cparams.pop(REPLY_KEY, None)
    if reply_s is None:
        return None
    import psycopg

    where = f"{cparams.get('host') or 'localhost'}:{cparams.get('port') or 5432}"
    try:
        conn = _bounded_class().connect(*cargs, **cparams)
    except psycopg.OperationalError as exc:
        if "timeout expired" not in str(exc):
            raise
        seconds = cparams.get("connect_timeout")
        raise _no_reply(f"no reply: {where} did not answer within the {seconds} s connect timeout") from exc
    conn.coevo_reply_s = float(reply_s)
    return conn


@functools.cache
def _no_reply_class() -> type[Exception]:
    import psycopg

    class NoReplyError(psycopg.OperationalError):
        """A wait on the server that heard nothing for its bound (the connection is closed)."""

        def __init__(self, reason: str) -> None:
            super().__init__(reason)
            self.fault = DatabaseFault("no reply", reason)

    return NoReplyError


def _no_reply(reason: str) -> Exception:
    return _no_reply_class()(reason)


@functools.cache
def _bounded_class() -> Any:
    import psycopg

    class BoundedConnection(psycopg.Connection[Any]):
        """A psycopg connection whose every wait on the server is watched (see the module doc)."""

        coevo_reply_s: float = 0.0

        def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
            bound = self.coevo_reply_s
            if bound <= 0:
                return super().wait(gen, *args, **kwargs)
            token = _WATCHDOG.arm(self.pgconn.socket, bound)
            try:
                return super().wait(gen, *args, **kwargs)
            except psycopg.Error as exc:
                if not _WATCHDOG.disarm(token):
                    raise
                where = "the database server"
                with suppress(Exception):
                    where = f"{self.info.host}:{self.info.port}"
                with suppress(Exception):
                    self.close()  # closed: the pool sees a disconnect and discards it
                raise _no_reply(
                    f"no reply: {where} did not answer within {bound:g} s (a silent or crawling network, or a hung server)"
                ) from exc
            finally:
                _WATCHDOG.disarm(token)

    return BoundedConnection
