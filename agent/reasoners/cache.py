"""LLM response cache of a study, keyed by prompt hash, in the study's own database.

An interrupted run replays its earlier calls from here for free; with PostgreSQL storage
every worker shares it. Rows belong to one study (``coevo runs delete`` removes them, and a
new study that takes a deleted one's name starts without them); the key is a SHA-256 of
(model, messages, temperature). Replies cached before coevo 0.2 (table ``coevo_llm_cache``,
not tied to a study) are no longer read.

A study keeps at most :data:`MAX_STUDY_CACHE_CHARS` characters of replies: past it, its oldest
replies are evicted first. A resumed run replays the calls of the round it was interrupted in,
the newest ones, so eviction costs nothing but a run's older, never-again-asked prompts.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

import sqlalchemy as sa

from coevo.search.side_tables import PurgeReason
from coevo.search.storage import side_engine

MAX_STUDY_CACHE_CHARS = 8_000_000
"""Characters of cached replies one study keeps (about 8 MB); the oldest go first past it."""

_META = sa.MetaData()
_TABLE = sa.Table(
    "coevo_llm_replies",
    _META,
    sa.Column("study", sa.String(512), primary_key=True),
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("model", sa.String(200), nullable=False),
    sa.Column("response", sa.Text, nullable=False),
    sa.Column("prompt_tokens", sa.Integer, nullable=False),
    sa.Column("completion_tokens", sa.Integer, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)


@dataclass(frozen=True)
class CachedReply:
    """A stored reply with the tokens it cost when it was first paid for."""

    text: str
    prompt_tokens: int
    completion_tokens: int


def prompt_key(model: str, messages: list[dict[str, str]], temperature: float) -> str:
    """Stable hash of a request."""
    blob = json.dumps({"model": model, "messages": messages, "temperature": temperature}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """Get/put replies in table ``coevo_llm_cache`` of the database at ``url``.

    Args:
        url: a storage URL (the study's); None for the default SQLite file.
        max_study_chars: characters of replies kept per study (oldest evicted first).
    """

    def __init__(self, url: str | None, *, max_study_chars: int = MAX_STUDY_CACHE_CHARS) -> None:
        self.url = url
        self.max_study_chars = max_study_chars
        self._engine: sa.Engine | None = None

    @property
    def engine(self) -> sa.Engine:
        """The database's engine, opened (and its table created) at the first use: building a reasoner for a search
        that is then refused (a bad ``--kb-from``, an endpoint that does not answer) must not create the storage."""
        if self._engine is None:
            self._engine = side_engine(self.url, _META)
        return self._engine

    def get(self, study: str, key: str) -> CachedReply | None:
        """The reply study ``study`` stored under ``key``, if any."""
        with self.engine.connect() as con:
            row = con.execute(sa.select(_TABLE).where(_TABLE.c.study == study, _TABLE.c.key == key)).first()
        return CachedReply(row.response, row.prompt_tokens, row.completion_tokens) if row else None

    def put(self, study: str, key: str, model: str, reply: CachedReply) -> None:
        """Store a reply of study ``study`` (first writer wins when two workers race), then evict past the study's bound."""
        with self.engine.begin() as con:
            if con.execute(sa.select(_TABLE.c.key).where(_TABLE.c.study == study, _TABLE.c.key == key)).first() is None:
                con.execute(
                    _TABLE.insert().values(
                        study=study,
                        key=key,
                        model=model,
                        response=reply.text,
                        prompt_tokens=reply.prompt_tokens,
                        completion_tokens=reply.completion_tokens,
                        created=time.time(),
                    )
                )
                self._evict(con, study)

    def _evict(self, con: sa.Connection, study: str) -> None:
        """Delete ``study``'s oldest replies until the rest fit in :attr:`max_study_chars`."""
        size = sa.func.length(_TABLE.c.response)
        total = con.execute(sa.select(sa.func.coalesce(sa.func.sum(size), 0)).where(_TABLE.c.study == study)).scalar_one()
        if int(total) <= self.max_study_chars:
            return
        newest_first = con.execute(
            sa.select(_TABLE.c.key, size).where(_TABLE.c.study == study).order_by(_TABLE.c.created.desc(), _TABLE.c.key)
        ).all()
        kept, drop = 0, []
        for key, chars in newest_first:
            kept += int(chars)
            if kept > self.max_study_chars:
                drop.append(key)
        for start in range(0, len(drop), 500):  # bounded IN lists
            con.execute(_TABLE.delete().where(_TABLE.c.study == study, _TABLE.c.key.in_(drop[start : start + 500])))

    def size(self, study: str) -> tuple[int, int]:
        """(replies, characters) study ``study`` keeps."""
        with self.engine.connect() as con:
            row = con.execute(
                sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(sa.func.length(_TABLE.c.response)), 0)).where(
                    _TABLE.c.study == study
                )
            ).one()
        return int(row[0]), int(row[1])

    def delete(self, study: str) -> int:
        """Remove every reply of ``study``; returns how many there were."""
        with self.engine.begin() as con:
            return int(con.execute(_TABLE.delete().where(_TABLE.c.study == study)).rowcount or 0)

    def __len__(self) -> int:
        with self.engine.connect() as con:
            return int(con.execute(sa.select(sa.func.count()).select_from(_TABLE)).scalar_one())


def purge_replies(storage: str | None, study: str, reason: PurgeReason) -> str | None:
    """Remove the cached replies of ``study`` (listed in :data:`search.side_tables.SIDE_TABLES`)."""
    cache = ResponseCache(storage)
    try:
        n = cache.delete(study)
    finally:
        cache.engine.dispose()
    return f"{n} cached LLM replies" if n else None
