"""Chat sessions on disk: every user line, model reply, tool call, tool result and command.

Two tables in the study storage's database (SQLite ``runs/coevo.sqlite3`` by default, or
PostgreSQL): ``coevo_chat_sessions`` (id ``S<n>``, model, created) and
``coevo_chat_events`` (one row per event, in order, with token counts and cost where a
model call made it). Events are written as they happen, so an interrupted turn or a
killed process loses nothing already shown; a session is resumed by replaying its events.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
import sqlalchemy.exc

from coevo.search.errors import StorageError, UserInputError
from coevo.search.storage import side_engine

metadata = sa.MetaData()
sessions = sa.Table(
    "coevo_chat_sessions",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("number", sa.Integer, nullable=False, unique=True),
    sa.Column("model", sa.String(300), nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
)
events = sa.Table(
    "coevo_chat_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session", sa.String(32), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("data", sa.Text, nullable=True),
    sa.Column("prompt_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("completion_tokens", sa.Integer, nullable=False, default=0),
    sa.Column("cost_usd", sa.Float, nullable=True),
    sa.Column("at", sa.Float, nullable=False),
)

KINDS = ("user", "assistant", "tool_result", "command", "notice", "error")


@dataclass(frozen=True)
class Event:
    """One recorded event of a session."""

    kind: str
    content: str
    data: dict[str, Any]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


class SessionStore:
    """Sessions in the database of ``storage`` (created on first use).

    Raises:
        StorageError: the database cannot be opened.
    """

    def __init__(self, storage: str | None) -> None:
        self.engine = side_engine(storage, metadata)

    def create(self, model: str | None) -> str:
        """A new session; returns its id (``S1``, ``S2``, ...)."""
        for _ in range(5):
            try:
                with self.engine.begin() as conn:
                    number = int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(sessions.c.number), 0))).scalar_one()) + 1
                    conn.execute(sessions.insert().values(id=f"S{number}", number=number, model=model, created_at=time.time()))
                    return f"S{number}"
            except sqlalchemy.exc.IntegrityError:
                continue  # another chat took that number at the same moment
        raise StorageError("could not allocate a chat session id (five concurrent attempts collided); retry")

    def ids(self) -> list[str]:
        """Every session id, oldest first."""
        with self.engine.connect() as conn:
            return [r.id for r in conn.execute(sa.select(sessions.c.id).order_by(sessions.c.number))]

    def check(self, session: str) -> None:
        """Raise a clear error unless ``session`` exists."""
        if session not in self.ids():
            known = self.ids()
            listed = ", ".join(known[-10:]) if known else "none yet"
            raise UserInputError(f"no chat session {session!r} (sessions: {listed}); start a new one with plain `coevo chat`")

    def add(self, session: str, event: Event) -> None:
        """Append ``event`` to ``session`` (its own transaction: nothing shown is ever lost)."""
        if event.kind not in KINDS:
            raise ValueError(f"unknown event kind {event.kind!r}")
        try:
            self._insert(session, event)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise StorageError(
                f"could not record to the chat session store ({str(exc).splitlines()[0]}); what was recorded before is kept"
            ) from exc

    def _insert(self, session: str, event: Event) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                events.insert().values(
                    session=session,
                    kind=event.kind,
                    content=event.content,
                    data=json.dumps(event.data, default=str) if event.data else None,
                    prompt_tokens=event.prompt_tokens,
                    completion_tokens=event.completion_tokens,
                    cost_usd=event.cost_usd,
                    at=time.time(),
                )
            )

    def events(self, session: str) -> list[Event]:
        """Every event of ``session``, in order."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(events).where(events.c.session == session).order_by(events.c.id)).all()
        return [
            Event(r.kind, r.content, json.loads(r.data) if r.data else {}, r.prompt_tokens, r.completion_tokens, r.cost_usd) for r in rows
        ]

    def usage(self, session: str) -> dict[str, Any]:
        """Token and cost totals of ``session``."""
        with self.engine.connect() as conn:
            r = conn.execute(
                sa.select(
                    sa.func.coalesce(sa.func.sum(events.c.prompt_tokens), 0),
                    sa.func.coalesce(sa.func.sum(events.c.completion_tokens), 0),
                    sa.func.sum(events.c.cost_usd),
                    sa.func.count(),
                ).where(events.c.session == session)
            ).one()
        return {"prompt_tokens": int(r[0]), "completion_tokens": int(r[1]), "cost_usd": r[2], "events": int(r[3])}
