"""LLM response cache of a study, keyed by prompt hash, in the study's own database.

An interrupted run replays its earlier calls from here for free; with PostgreSQL storage
every worker shares it. Rows belong to one study (``coevo runs delete`` removes them, and a
new study that takes a deleted one's name starts without them); the key is a SHA-256 of
(model, messages, temperature). Replies cached before coevo 0.2 (table ``coevo_llm_cache``,
not tied to a study) are no longer read.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

import sqlalchemy as sa

from coevo.search.side_tables import PurgeReason
from coevo.search.storage import side_engine

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
    """

    def __init__(self, url: str | None) -> None:
        self.engine = side_engine(url, _META)

    def get(self, study: str, key: str) -> CachedReply | None:
        """The reply study ``study`` stored under ``key``, if any."""
        with self.engine.connect() as con:
            row = con.execute(sa.select(_TABLE).where(_TABLE.c.study == study, _TABLE.c.key == key)).first()
        return CachedReply(row.response, row.prompt_tokens, row.completion_tokens) if row else None

    def put(self, study: str, key: str, model: str, reply: CachedReply) -> None:
        """Store a reply of study ``study`` (first writer wins when two workers race)."""
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
