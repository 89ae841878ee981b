"""The versioned knowledge store: heuristics with append-only history and evidence rows.

One store holds many knowledge bases, one per study (named after it). Tables (SQLAlchemy
Core; the same schema on SQLite and PostgreSQL):

* ``coevo_kb_schema``: applied migrations (see :data:`MIGRATIONS`).
* ``coevo_kb_bases``: one row per knowledge base: its problem spec and the next heuristic
  number. Writers lock this row first, so two search workers writing the same knowledge
  base queue instead of interleaving (SQLite additionally takes the write lock at BEGIN).
* ``coevo_kb_versions``: every version of every heuristic, never updated or deleted; the
  current state is the highest version. Each row says what changed, why, who changed it
  and in which round.
* ``coevo_kb_evidence``: evidence rows (study, trial, support or refute, effect size,
  source: ``reasoner`` for the reasoner's own statistics or citations, ``record`` for the
  validation loop's win/loss of proposals that cited the heuristic). Rows are appended
  only when a trial's verdict is new or changed, so the latest row per
  (heuristic, study, trial, source) is the current verdict and older rows are history.

Merge rule on save: the reasoner's fields win, except that a status a person set
(accepted, rejected) is kept unless the saver is a person. Claims are matched by key, so
two workers that mined the same claim update one heuristic.

Default location: for a SQLite study file ``X.sqlite3`` the store is ``X.kb.sqlite3``
beside it; any other URL (PostgreSQL) holds the tables in the same database.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa
import sqlalchemy.exc
from sqlalchemy.engine import Connection, Engine

from coevo.knowledge.heuristics import HUMAN, STATUSES, Heuristic, KnowledgeBase
from coevo.search.errors import StorageError, StorageMissingError, UserInputError
from coevo.search.side_tables import PurgeReason
from coevo.search.storage import has_table, lock_row, resolve_storage_url, side_engine, sqlite_path

SCHEMA_VERSION = 1
"""The newest schema this code reads and writes."""

metadata = sa.MetaData()
schema_table = sa.Table(
    "coevo_kb_schema",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.Float, nullable=False),
)
bases = sa.Table(
    "coevo_kb_bases",
    metadata,
    sa.Column("name", sa.String(512), primary_key=True),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("next_number", sa.Integer, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)
versions = sa.Table(
    "coevo_kb_versions",
    metadata,
    sa.Column("kb", sa.String(512), primary_key=True),
    sa.Column("hid", sa.String(32), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("scope", sa.Text, nullable=False),
    sa.Column("structured", sa.Text, nullable=True),
    sa.Column("confidence", sa.Float, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("author", sa.String(200), nullable=False),
    sa.Column("origin", sa.String(600), nullable=True),
    sa.Column("created_round", sa.Integer, nullable=False),
    sa.Column("round", sa.Integer, nullable=False),
    sa.Column("change", sa.Text, nullable=False),
    sa.Column("changed_by", sa.String(200), nullable=False),
    sa.Column("at", sa.Float, nullable=False),
)
evidence_table = sa.Table(
    "coevo_kb_evidence",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kb", sa.String(512), nullable=False),
    sa.Column("hid", sa.String(32), nullable=False),
    sa.Column("study", sa.String(512), nullable=False),
    sa.Column("trial", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(8), nullable=False),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("effect", sa.Float, nullable=True),
    sa.Column("round", sa.Integer, nullable=False),
    sa.Column("at", sa.Float, nullable=False),
    sa.Index("ix_coevo_kb_evidence_kb_hid", "kb", "hid"),
)


def _migrate_v1(conn: Connection) -> None:
    # v1 is the initial schema. Later migrations ALTER what v1 created; never edit this one
    # to change the schema (stores written by v1 must stay readable).
    metadata.create_all(conn, tables=[bases, versions, evidence_table], checkfirst=True)


MIGRATIONS: tuple[Callable[[Connection], None], ...] = (_migrate_v1,)
"""``MIGRATIONS[i]`` upgrades a store from schema ``i`` to ``i + 1``."""
assert len(MIGRATIONS) == SCHEMA_VERSION


@dataclass(frozen=True)
class Version:
    """One stored version of a heuristic (a row of ``coevo_kb_versions``)."""

    kb: str
    hid: str
    version: int
    key: str
    text: str
    scope: dict[str, Any]
    structured: dict[str, Any] | None
    confidence: float
    status: str
    author: str
    origin: str | None
    created_round: int
    round: int
    change: str
    changed_by: str
    at: float

    def summary(self) -> dict[str, Any]:
        """The version as one history entry (exports, ``coevo kb show --json``)."""
        return {
            "version": self.version,
            "round": self.round,
            "status": self.status,
            "confidence": self.confidence,
            "change": self.change,
            "by": self.changed_by,
        }

    def heuristic(self) -> Heuristic:
        """The heuristic as of this version (evidence lists empty)."""
        return Heuristic(
            id=self.hid,
            key=self.key,
            text=self.text,
            scope=dict(self.scope),
            structured=dict(self.structured) if self.structured else None,
            confidence=self.confidence,
            status=self.status,  # type: ignore[arg-type]
            author=self.author,
            created_round=self.created_round,
            updated_round=self.round,
            version=self.version,
            origin=self.origin,
        )


@dataclass(frozen=True)
class EvidenceRow:
    """One verdict of one trial on one heuristic."""

    hid: str
    study: str
    trial: int
    kind: str
    """``support`` or ``refute``."""
    source: str
    """``reasoner`` (the reasoner's statistics or citations) or ``record`` (validation loop)."""
    effect: float | None
    round: int


@dataclass(frozen=True)
class BaseInfo:
    """A knowledge base in the store."""

    name: str
    spec: dict[str, Any]
    heuristics: int
    versions: int


def default_kb_url(storage: str | None) -> str:
    """Where the knowledge store of the study storage ``storage`` lives (see module doc)."""
    resolved = resolve_storage_url(storage)
    path = sqlite_path(resolved)
    if path is None:
        return resolved
    stem = path.name.removesuffix(path.suffix) if path.suffix else path.name
    return "sqlite:///" + str(path.with_name(f"{stem}.kb{path.suffix or '.sqlite3'}"))


_ENGINES: dict[tuple[str, float], Engine] = {}
_MIGRATED: set[Engine] = set()


def _engine(url: str, busy_timeout_s: float) -> Engine:
    # one engine per database and process: an in-memory store must be the same database on
    # every open, and engines are pools meant to be shared. A relative SQLite path is keyed by
    # the file it names now: the same URL in another working folder is another database.
    path = sqlite_path(url)
    key = (f"sqlite:///{path.resolve()}" if path is not None else url, busy_timeout_s)
    if key not in _ENGINES:
        # our tables are created by the migrations, not by side_engine
        _ENGINES[key] = side_engine(url, sa.MetaData(), busy_timeout_s=busy_timeout_s)
    return _ENGINES[key]


def _friendly(exc: sqlalchemy.exc.SQLAlchemyError, url: str, doing: str) -> StorageError:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "locked" in text or "could not obtain lock" in text:
        return StorageError(
            f"knowledge store {url!r} is locked by another process while {doing} (gave up waiting); nothing was written: "
            "retry when it is free"
        )
    return StorageError(f"knowledge store {url!r} failed while {doing}: {text}; nothing was written (each write is one transaction)")


class KnowledgeStore:
    """The versioned store at ``url`` (created and migrated on open).

    Args:
        url: SQLAlchemy URL of the store (see :func:`default_kb_url`).
        busy_timeout_s: how long a SQLite writer waits for another writer's lock.

        create: False for readers: a store that does not exist yet is a
            :class:`~coevo.search.errors.StorageMissingError` and nothing is created (no file, no tables).

    Raises:
        StorageError: unreachable, locked, or written by a newer coevo (schema version).
    """

    def __init__(self, url: str, *, busy_timeout_s: float = 30.0, create: bool = True) -> None:
        self.url = url
        path = sqlite_path(url)
        if path is not None and path.is_dir():  # no store can be there, and "missing" would let a caller create its study first
            raise StorageError(f"the knowledge store file, {path}, is a folder: move it away, or pass another --storage")
        if not create and path is not None and not path.is_file():
            raise self._missing()
        try:
            self.engine = _engine(url, busy_timeout_s)
            if self.engine not in _MIGRATED:  # once per engine and process: the engine opens the store every round
                if not create and not has_table(self.engine, schema_table.name):
                    raise self._missing()
                self._migrate()
                _MIGRATED.add(self.engine)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise _friendly(exc, url, "opening it") from exc

    def _missing(self) -> StorageMissingError:
        return StorageMissingError(
            f"no knowledge store at {self.url!r} yet (no search that learns heuristics wrote there); nothing was created"
        )

    @classmethod
    def for_storage(cls, storage: str | None, *, create: bool = True) -> KnowledgeStore:
        """The store beside the study storage ``storage`` (``create=False``: readers; a missing store is an error, nothing is created)."""
        return cls(default_kb_url(storage), create=create)

    # ------------------------------------------------------------ schema

    def _migrate(self) -> None:
        try:
            metadata.create_all(self.engine, tables=[schema_table], checkfirst=True)
        except sqlalchemy.exc.OperationalError as exc:
            if "already exists" not in str(exc):
                raise
        with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # one migrator at a time; the others wait, then find nothing to do
                conn.exec_driver_sql("LOCK TABLE coevo_kb_schema IN EXCLUSIVE MODE")
            current = conn.execute(sa.select(sa.func.max(schema_table.c.version))).scalar() or 0
            if current > SCHEMA_VERSION:
                raise StorageError(
                    f"knowledge store {self.url!r} has schema version {current}, newer than this coevo reads "
                    f"({SCHEMA_VERSION}): upgrade coevo; the store was not changed"
                )
            for version in range(current, SCHEMA_VERSION):
                MIGRATIONS[version](conn)
                conn.execute(schema_table.insert().values(version=version + 1, applied_at=time.time()))

    def schema_version(self) -> int:
        """The schema version of the store."""
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.max(schema_table.c.version))).scalar() or 0)

    # ------------------------------------------------------------ reading

    def bases(self) -> list[BaseInfo]:
        """Every knowledge base in the store."""
        with self.engine.connect() as conn:
            counts = {
                r.kb: (r.n_h, r.n_v)
                for r in conn.execute(
                    sa.select(
                        versions.c.kb, sa.func.count(sa.distinct(versions.c.hid)).label("n_h"), sa.func.count().label("n_v")
                    ).group_by(versions.c.kb)
                )
            }
            rows = conn.execute(sa.select(bases.c.name, bases.c.spec).order_by(bases.c.name)).all()
        return [BaseInfo(r.name, json.loads(r.spec), *counts.get(r.name, (0, 0))) for r in rows]

    def exists(self, kb: str) -> bool:
        """True when knowledge base ``kb`` exists."""
        with self.engine.connect() as conn:
            return conn.execute(sa.select(bases.c.name).where(bases.c.name == kb)).first() is not None

    def spec(self, kb: str) -> dict[str, Any]:
        """The problem spec knowledge base ``kb`` was created for."""
        with self.engine.connect() as conn:
            text = conn.execute(sa.select(bases.c.spec).where(bases.c.name == kb)).scalar()
        if text is None:
            raise self._unknown_kb(kb)
        result: dict[str, Any] = json.loads(text)
        return result

    def _unknown_kb(self, kb: str) -> UserInputError:
        names = [b.name for b in self.bases()]
        hint = f"knowledge bases here: {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}" if names else "the store is empty"
        return UserInputError(
            f"no knowledge base named {kb!r} in {self.url} ({hint}); name one with --study NAME (`coevo kb list --all` lists them); "
            "a pelnas search creates one per study"
        )

    def history(self, kb: str, hid: str | None = None) -> list[Version]:
        """Every version (of heuristic ``hid``, or of all), oldest first (in write order)."""
        q = sa.select(versions).where(versions.c.kb == kb)
        if hid is not None:
            q = q.where(versions.c.hid == hid)
        with self.engine.connect() as conn:
            rows = conn.execute(q.order_by(versions.c.at, versions.c.version)).all()
        # write order; the versions of one save share a time, so ids break ties (H2 before H10)
        out = sorted((_version(r) for r in rows), key=lambda v: (v.at, _id_order(v.hid), v.version))
        if hid is not None:
            out.sort(key=lambda v: v.version)  # one heuristic: by version, whatever the clocks said
        if hid is not None and not out:
            raise self._unknown_id(kb, hid)
        return out

    def _unknown_id(self, kb: str, hid: str) -> UserInputError:
        if not self.exists(kb):
            return self._unknown_kb(kb)
        ids = sorted({v.hid for v in self.history(kb)}, key=_id_order)
        shown = ", ".join(ids[:12]) + (" ..." if len(ids) > 12 else "")
        return UserInputError(f"no heuristic {hid!r} in knowledge base {kb!r} (ids: {shown or 'none yet'}); see `coevo kb list`")

    def latest(self, kb: str) -> dict[str, Version]:
        """The current version of each heuristic, by id."""
        out: dict[str, Version] = {}
        for v in self.history(kb):
            if v.hid not in out or v.version > out[v.hid].version:
                out[v.hid] = v
        return out

    def evidence(self, kb: str, hid: str | None = None, *, current: bool = True) -> list[EvidenceRow]:
        """Evidence rows (of ``hid`` or all); ``current`` keeps the latest verdict per trial and source."""
        q = sa.select(evidence_table).where(evidence_table.c.kb == kb)
        if hid is not None:
            q = q.where(evidence_table.c.hid == hid)
        with self.engine.connect() as conn:
            rows = conn.execute(q.order_by(evidence_table.c.id)).all()
        all_rows = [EvidenceRow(r.hid, r.study, r.trial, r.kind, r.source, r.effect, r.round) for r in rows]
        if not current:
            return all_rows
        latest: dict[tuple[str, str, int, str], EvidenceRow] = {}
        for row in all_rows:
            latest[(row.hid, row.study, row.trial, row.source)] = row
        return list(latest.values())

    def load(self, kb: str, *, study: str | None = None) -> KnowledgeBase:
        """The current state of ``kb`` as a working copy (empty if it does not exist).

        A heuristic's ``support``, ``refute`` and ``effects`` are the reasoner's evidence from
        trials of ``study`` (default: ``kb``, as :meth:`save` writes them) only: they are bare trial
        numbers, and :meth:`save` writes them back under ``study``, so evidence an import brought
        along (trials of the source study) must not enter them, or it would come back as this
        study's trials of the same numbers.
        """
        study = study or kb
        heads = self.latest(kb)
        out = KnowledgeBase(version=sum(v.version for v in heads.values()))
        for hid in sorted(heads, key=_id_order):
            out.heuristics[hid] = heads[hid].heuristic()
        for row in self.evidence(kb):
            h = out.heuristics.get(row.hid)
            if h is None or row.source != "reasoner" or row.study != study:
                continue
            (h.support if row.kind == "support" else h.refute).append(row.trial)
            if row.effect is not None:
                h.effects[row.trial] = row.effect
        return out

    # ------------------------------------------------------------ writing

    def save(
        self,
        kb: str,
        working: KnowledgeBase,
        *,
        round_no: int,
        by: str,
        spec: dict[str, Any],
        study: str | None = None,
        extra_evidence: Sequence[EvidenceRow] = (),
    ) -> dict[str, str]:
        """Write the changed heuristics of ``working`` as new versions, in one transaction.

        Args:
            kb: knowledge base name (created if missing, for problem ``spec``).
            working: the edited working copy; heuristics are matched to stored ones by key.
            round_no: the round the changes belong to.
            by: who made the changes (reasoner label, ``validation``, ``human``...).
            spec: the problem spec (recorded when the knowledge base is created).
            study: the study the reasoner's evidence trials belong to (default: ``kb``).
            extra_evidence: rows from elsewhere (the validation loop), keyed by stored id.

        Returns:
            key -> stored id for every heuristic of ``working``.
        """
        study = study or kb
        try:
            with self.engine.begin() as conn:
                self._lock_base(conn, kb, spec)
                return self._save(conn, kb, working, round_no, by, study, extra_evidence)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise _friendly(exc, self.url, f"saving knowledge base {kb!r}") from exc

    def _lock_base(self, conn: Connection, kb: str, spec: dict[str, Any]) -> None:
        # concurrent savers of one knowledge base queue on its row
        defaults = {"spec": json.dumps(spec, sort_keys=True), "next_number": 1, "created_at": time.time()}
        lock_row(conn, bases, {"name": kb}, touch="next_number", defaults=defaults)

    def _save(
        self,
        conn: Connection,
        kb: str,
        working: KnowledgeBase,
        round_no: int,
        by: str,
        study: str,
        extra_evidence: Sequence[EvidenceRow],
    ) -> dict[str, str]:
        heads = _heads(conn, kb)
        next_number = int(conn.execute(sa.select(bases.c.next_number).where(bases.c.name == kb)).scalar_one())
        current = _current_verdicts(conn, kb)
        now = time.time()
        ids: dict[str, str] = {}
        new_versions: list[dict[str, Any]] = []
        new_evidence: list[dict[str, Any]] = []
        for h in working.heuristics.values():
            head = heads.get(h.key)
            if head is None:
                hid = f"H{next_number}"
                next_number += 1
            else:
                hid = head.hid
            ids[h.key] = hid
            row = _next_version(kb, hid, h, head, round_no=round_no, by=by, at=now)
            if row is not None:
                new_versions.append(row)
            for trials, kind in ((h.support, "support"), (h.refute, "refute")):
                for trial in trials:
                    if current.get((hid, study, int(trial), "reasoner")) != kind:
                        effect = h.effects.get(int(trial))
                        new_evidence.append(_evidence_row(kb, hid, study, int(trial), kind, "reasoner", effect, round_no, now))
        for e in extra_evidence:
            if current.get((e.hid, e.study, e.trial, e.source)) != e.kind:
                new_evidence.append(_evidence_row(kb, e.hid, e.study, e.trial, e.kind, e.source, e.effect, e.round, now))
        if new_versions:
            conn.execute(versions.insert(), new_versions)
        if new_evidence:
            conn.execute(evidence_table.insert(), new_evidence)
        conn.execute(bases.update().where(bases.c.name == kb).values(next_number=next_number))
        return ids

    def review(self, kb: str, hid: str, status: str, *, why: str, by: str = "human") -> Review:
        """Record a person's decision (``accepted`` or ``rejected``; or ``retired``) as a new version.

        A heuristic that already has ``status`` is left as it is (``recorded`` False): a second
        identical decision would only add a version that changes nothing.
        """
        if status not in STATUSES:
            raise UserInputError(f"unknown status {status!r}; choose from {', '.join(STATUSES)}")
        if not why.strip():
            raise UserInputError("say why (--why): the reason is kept in the heuristic's history")
        new: Version | None = None
        recorded = False
        try:
            with self.engine.begin() as conn:
                r = conn.execute(
                    sa.select(versions).where(versions.c.kb == kb, versions.c.hid == hid).order_by(versions.c.version.desc()).limit(1)
                ).first()
                if r is not None and _version(r).status == status:
                    new = _version(r)
                elif r is not None:
                    recorded = True
                    head = _version(r)
                    change = f"{status} by {by}: {why.strip()}"
                    new = replace(head, version=head.version + 1, status=status, change=change, changed_by=by, at=time.time())
                    conn.execute(versions.insert().values(**_row_of(new)))
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise _friendly(exc, self.url, f"reviewing {hid}") from exc
        if new is None:
            # raised after the transaction: on SQLite every transaction holds the write lock,
            # so the lookups that list the valid ids must not run inside it
            raise self._unknown_id(kb, hid)
        return Review(new, recorded)

    # ------------------------------------------------------------ study lifecycle

    def learned_from(self, kb: str, study: str) -> bool:
        """True when ``kb`` holds evidence from trials of study ``study`` (it was learned there, not imported)."""
        with self.engine.connect() as conn:
            q = sa.select(evidence_table.c.id).where(evidence_table.c.kb == kb, evidence_table.c.study == study).limit(1)
            return conn.execute(q).first() is not None

    def rename(self, kb: str, new: str) -> None:
        """Rename knowledge base ``kb`` to ``new`` (heuristics, versions and evidence go with it), atomically."""
        try:
            with self.engine.begin() as conn:
                conn.execute(bases.update().where(bases.c.name == kb).values(name=new))
                conn.execute(versions.update().where(versions.c.kb == kb).values(kb=new))
                conn.execute(evidence_table.update().where(evidence_table.c.kb == kb).values(kb=new))
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise _friendly(exc, self.url, f"renaming {kb!r}") from exc

    def delete(self, kb: str) -> int:
        """Delete knowledge base ``kb`` with its history and evidence, atomically; returns its heuristic count."""
        n = len(self.latest(kb))
        try:
            with self.engine.begin() as conn:
                conn.execute(evidence_table.delete().where(evidence_table.c.kb == kb))
                conn.execute(versions.delete().where(versions.c.kb == kb))
                conn.execute(bases.delete().where(bases.c.name == kb))
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise _friendly(exc, self.url, f"deleting {kb!r}") from exc
        return n

    # ------------------------------------------------------------ exchange

    def export(self, kb: str) -> Iterator[dict[str, Any]]:
        """One record per heuristic: its current fields, full history and evidence."""
        heads = self.latest(kb)
        if not heads and not self.exists(kb):
            raise self._unknown_kb(kb)
        history: dict[str, list[Version]] = {}
        for v in self.history(kb):
            history.setdefault(v.hid, []).append(v)
        evidence: dict[str, list[EvidenceRow]] = {}
        for e in self.evidence(kb):
            evidence.setdefault(e.hid, []).append(e)
        for hid in sorted(heads, key=_id_order):
            head = heads[hid]
            yield {
                "type": "heuristic",
                "schema": SCHEMA_VERSION,
                "kb": kb,
                "id": hid,
                "key": head.key,
                "text": head.text,
                "scope": head.scope,
                "structured": head.structured,
                "confidence": head.confidence,
                "status": head.status,
                "author": head.author,
                "origin": head.origin,
                "created_round": head.created_round,
                "updated_round": head.round,
                "version": head.version,
                "history": [v.summary() for v in history[hid]],
                "evidence": [
                    {"study": e.study, "trial": e.trial, "kind": e.kind, "source": e.source, "effect": e.effect, "round": e.round}
                    for e in evidence.get(hid, [])
                ],
            }

    def import_records(self, kb: str, records: Sequence[ImportRecord], *, spec: dict[str, Any], by: str, round_no: int = 0) -> list[str]:
        """Add ``records`` to ``kb`` as new heuristics (or new versions of the same claims), atomically.

        Statuses: ``validated`` becomes ``proposed`` (it was validated elsewhere and must earn
        it again here); the others are kept, so rejected and refuted claims stay out of prompts.
        The reasoner's evidence comes along, still pointing at the source study's trials.

        Returns:
            the stored ids, in record order.
        """
        working = KnowledgeBase()
        extra: list[EvidenceRow] = []
        for rec in records:
            status = "proposed" if rec.status == "validated" else rec.status
            h = Heuristic(
                id=f"I{len(working.heuristics)}",
                key=rec.key,
                text=rec.text,
                scope=rec.scope,
                structured=rec.structured,
                confidence=rec.confidence,
                status=status,  # type: ignore[arg-type]
                author=rec.author,
                created_round=round_no,
                updated_round=round_no,
                note=import_note(rec.origin, rec.status, status),
                origin=rec.origin,
            )
            working.heuristics[h.id] = h
        try:
            with self.engine.begin() as conn:
                self._lock_base(conn, kb, spec)
                ids = self._save(conn, kb, working, round_no, by, kb, ())
                for rec in records:
                    for e in rec.evidence:
                        extra.append(
                            EvidenceRow(ids[rec.key], e["study"], int(e["trial"]), e["kind"], e["source"], e.get("effect"), round_no)
                        )
                # an import of the same file again must not count its evidence twice: rows already there are skipped
                ev = evidence_table.c
                held = {
                    (r.hid, r.study, int(r.trial), r.kind, r.source)
                    for r in conn.execute(sa.select(ev.hid, ev.study, ev.trial, ev.kind, ev.source).where(ev.kb == kb))
                }
                now = time.time()
                rows = [
                    _evidence_row(kb, e.hid, e.study, e.trial, e.kind, e.source, e.effect, e.round, now)
                    for e in extra
                    if (e.hid, e.study, e.trial, e.kind, e.source) not in held
                ]
                if rows:
                    conn.execute(evidence_table.insert(), rows)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            raise _friendly(exc, self.url, f"importing into {kb!r}") from exc
        return [ids[rec.key] for rec in records]


@dataclass(frozen=True)
class Review:
    """What :meth:`KnowledgeStore.review` did: the heuristic's head version after it, and whether it wrote one."""

    head: Version
    recorded: bool
    """False when the heuristic already had the decided status: nothing was written."""


IMPORT_BY = "import from "
"""How the first version of an imported heuristic names who wrote it: this, then what was imported (a study or a file)."""


def import_note(origin: str, there: str, here: str) -> str:
    """The change note of an imported heuristic's first version: where it came from, and its status there when it differs.

    >>> import_note("nb201-src:H3", "validated", "proposed")
    'imported from nb201-src:H3 (was validated there)'
    """
    return f"imported from {origin}" + (f" (was {there} there)" if there != here else "")


def status_there(first: Version) -> str:
    """The status an imported heuristic had where it came from, read from its first version (:func:`import_note`).

    >>> v = Version("kb", "H1", 1, "k", "t", {}, None, 0.5, "proposed", "offline", "src:H3", 0, 0,
    ...             "imported from src:H3 (was validated there)", "import from src", 0.0)
    >>> status_there(v), status_there(replace(v, change="imported from src:H3"))
    ('validated', 'proposed')
    """
    was = _WAS_THERE.search(first.change)
    return was.group(1) if was is not None and was.group(1) in STATUSES else first.status


def import_source(first: Version) -> str | None:
    """What the import that made a heuristic named (a study, or an export file), from its first version's writer (:data:`IMPORT_BY`)."""
    return first.changed_by.removeprefix(IMPORT_BY) if first.changed_by.startswith(IMPORT_BY) else None


_WAS_THERE = re.compile(r"^imported from .* \(was (\w+) there\)")


@dataclass(frozen=True)
class ImportRecord:
    """A heuristic read from an export (validated by :func:`knowledge.exchange.parse_jsonl`)."""

    key: str
    text: str
    scope: dict[str, Any]
    structured: dict[str, Any] | None
    confidence: float
    status: str
    author: str
    origin: str
    evidence: tuple[dict[str, Any], ...] = ()


class StudyKnowledge:
    """The engine's handle on one study's knowledge base: load the working copy, save it back.

    Args:
        store: the knowledge store.
        kb: knowledge base name (the study name).
        spec: the study's problem spec.
        by: who writes (the reasoner label).
    """

    def __init__(self, store: KnowledgeStore, kb: str, spec: dict[str, Any], by: str) -> None:
        self.store = store
        self.kb = kb
        self.spec = spec
        self.by = by
        self.extra_evidence: list[EvidenceRow] = []

    def load(self) -> KnowledgeBase:
        return self.store.load(self.kb)

    def save(self, kb: KnowledgeBase, round_no: int) -> None:
        self.store.save(self.kb, kb, round_no=round_no, by=self.by, spec=self.spec, extra_evidence=self.extra_evidence)
        self.extra_evidence = []


def purge_knowledge(storage: str | None, study: str, reason: PurgeReason) -> str | None:
    """The knowledge base of a study that goes (listed in :data:`search.side_tables.SIDE_TABLES`).

    ``coevo runs delete`` deletes it. A new study that takes the name of a deleted one must
    not inherit its heuristics (their evidence points at trials that no longer exist): a
    knowledge base learned from a study of that name is set aside as ``NAME~deleted-<time>``
    (still listed by ``coevo kb list --all``). One that only holds imported heuristics
    (``coevo kb import --study NAME`` before the search) is kept for the new study.
    """
    url = default_kb_url(storage)
    path = sqlite_path(url)
    if path is not None and not path.exists():
        return None  # no knowledge store beside this storage: nothing to do, and no file to create
    store = KnowledgeStore(url)
    if not store.exists(study):
        return None
    if reason == "delete":
        return f"knowledge base ({store.delete(study)} heuristics)"
    if not store.learned_from(study, study):
        return None
    archived = f"{study}~deleted-{time.strftime('%Y%m%dT%H%M%S')}"
    store.rename(study, archived)
    return f"a knowledge base of {len(store.latest(archived))} heuristics, set aside as {archived!r}"


# ---------------------------------------------------------------- helpers

_COMPARED = ("text", "scope", "structured", "confidence", "status", "author", "origin")


def _heads(conn: Connection, kb: str) -> dict[str, Version]:
    """The latest stored version of each heuristic of ``kb``, by key."""
    heads: dict[str, Version] = {}
    for r in conn.execute(sa.select(versions).where(versions.c.kb == kb)).all():
        v = _version(r)
        if v.key not in heads or v.version > heads[v.key].version:
            heads[v.key] = v
    return heads


def _current_verdicts(conn: Connection, kb: str) -> dict[tuple[str, str, int, str], str]:
    """The latest verdict (``support``/``refute``) per (heuristic, study, trial, source) of ``kb``."""
    current: dict[tuple[str, str, int, str], str] = {}
    for r in conn.execute(
        sa.select(evidence_table.c.hid, evidence_table.c.study, evidence_table.c.trial, evidence_table.c.source, evidence_table.c.kind)
        .where(evidence_table.c.kb == kb)
        .order_by(evidence_table.c.id)
    ):
        current[(r.hid, r.study, r.trial, r.source)] = r.kind
    return current


def _next_version(kb: str, hid: str, h: Heuristic, head: Version | None, *, round_no: int, by: str, at: float) -> dict[str, Any] | None:
    """The version row to write for working heuristic ``h`` over its stored ``head``, or None when nothing changed."""
    status: str = h.status
    if head is not None and head.status in HUMAN and by != "human":
        status = head.status  # a person's decision stands until a person changes it
    version, created_round = (1, h.created_round) if head is None else (head.version + 1, head.created_round)
    row = {
        "kb": kb,
        "hid": hid,
        "version": version,
        "key": h.key,
        "text": h.text,
        "scope": json.dumps(h.scope, sort_keys=True),
        "structured": json.dumps(h.structured, sort_keys=True) if h.structured is not None else None,
        "confidence": float(h.confidence),
        "status": status,
        "author": h.author,
        "origin": h.origin,
        "created_round": created_round,
        "round": round_no,
        "changed_by": by,
        "at": at,
    }
    if head is None:
        row["change"] = h.note or "created"
        return row
    diff = _diff(head, row)
    if not diff:
        return None
    row["change"] = f"{h.note}; changed {diff}" if h.note else f"changed {diff}"
    return row


def _diff(head: Version, row: dict[str, Any]) -> str:
    changed = []
    for name in _COMPARED:
        old: Any = getattr(head, name)
        new: Any = row[name]
        if name in ("scope", "structured"):
            new = json.loads(new) if new is not None else None
        if name == "confidence":
            if abs(float(old) - float(new)) >= 5e-4:
                changed.append(f"confidence {old:.3f}->{new:.3f}")
        elif old != new:
            changed.append(f"status {old}->{new}" if name == "status" else name)
    return ", ".join(changed)


def _evidence_row(
    kb: str, hid: str, study: str, trial: int, kind: str, source: str, effect: float | None, round_no: int, at: float
) -> dict[str, Any]:
    return {
        "kb": kb,
        "hid": hid,
        "study": study,
        "trial": trial,
        "kind": kind,
        "source": source,
        "effect": None if effect is None else float(effect),
        "round": round_no,
        "at": at,
    }


def _version(r: Any) -> Version:
    data = {name: getattr(r, name) for name in Version.__dataclass_fields__}
    data["scope"] = json.loads(data["scope"])
    data["structured"] = json.loads(data["structured"]) if data["structured"] else None
    return Version(**data)


def _row_of(v: Version) -> dict[str, Any]:
    row = {name: getattr(v, name) for name in Version.__dataclass_fields__}
    row["scope"] = json.dumps(v.scope, sort_keys=True)
    row["structured"] = json.dumps(v.structured, sort_keys=True) if v.structured is not None else None
    return row


def _id_order(hid: str) -> tuple[int, str]:
    return (int(hid[1:]), hid) if hid[1:].isdigit() else (10**9, hid)


def iter_ids(values: Iterable[str]) -> list[str]:
    """Heuristic ids in natural order (H2 before H10)."""
    return sorted(values, key=_id_order)
