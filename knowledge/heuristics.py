"""Heuristics and the small interface the co-evolution engine keeps them behind.

A heuristic is a claim about the design space ("nor_conv_3x3 on edge 1->2 raises cifar10
accuracy by 2.1 ± 0.7 points"), with its scope, a structured form where one exists, a
confidence, a status, its author (which reasoner) and evidence (trial numbers that support
or refute it). :class:`KnowledgeBase` is an in-memory collection with a version counter;
:class:`KnowledgeStore` is where it is persisted between rounds. The full store (history,
review, PostgreSQL) is the knowledge-base issue's; anything implementing
:class:`KnowledgeStore` can replace :class:`StudyAttrStore`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

import optuna

Status = Literal["proposed", "validated", "refuted", "retired", "accepted", "rejected"]
INACTIVE: frozenset[str] = frozenset({"refuted", "retired", "rejected"})
"""Statuses never put in prompts or used to guide proposals."""


@dataclass
class Heuristic:
    """One design heuristic.

    Attributes:
        id: stable id, ``H<n>``.
        key: identity of the claim (e.g. ``edge_op:accuracy:2:nor_conv_3x3``), so a
            re-mined claim updates its heuristic instead of duplicating it.
        text: the claim in words.
        scope: where it holds, e.g. ``{"problem": "nb201", "dataset": ..., "device": ..., "niche": ...}``.
        structured: machine-readable form (objective, effect, ci, counts), or None.
        confidence: 0..1.
        status: proposed, validated, refuted, retired, accepted or rejected.
        author: ``offline`` or the LLM model name.
        support: trial numbers that support it; refute: those that refute it.
        created_round / updated_round: round numbers.
        version: bumped on every change.
    """

    id: str
    key: str
    text: str
    scope: dict[str, Any]
    structured: dict[str, Any] | None = None
    confidence: float = 0.5
    status: Status = "proposed"
    author: str = "offline"
    support: list[int] = field(default_factory=list)
    refute: list[int] = field(default_factory=list)
    created_round: int = 0
    updated_round: int = 0
    version: int = 1

    @property
    def active(self) -> bool:
        """True unless refuted, retired or rejected."""
        return self.status not in INACTIVE


@dataclass
class KnowledgeBase:
    """The heuristics of one search, addressed by id and by claim key."""

    heuristics: dict[str, Heuristic] = field(default_factory=dict)
    version: int = 0

    def by_key(self, key: str) -> Heuristic | None:
        """The heuristic making claim ``key``, if any."""
        return next((h for h in self.heuristics.values() if h.key == key), None)

    def upsert(self, key: str, round_no: int, **fields: Any) -> tuple[Heuristic, bool]:
        """Create the heuristic for ``key`` or update it; returns (heuristic, created)."""
        h = self.by_key(key)
        self.version += 1
        if h is None:
            h = Heuristic(id=f"H{len(self.heuristics) + 1}", key=key, created_round=round_no, updated_round=round_no, **fields)
            self.heuristics[h.id] = h
            return h, True
        for name, value in fields.items():
            setattr(h, name, value)
        h.updated_round = round_no
        h.version += 1
        return h, False

    def active(self, *, niche: str | None = None) -> list[Heuristic]:
        """Active heuristics whose scope admits ``niche`` (a heuristic without a niche admits all)."""
        return [h for h in self.heuristics.values() if h.active and h.scope.get("niche") in (None, niche)]

    def relevant(self, *, niche: str | None, limit: int) -> list[Heuristic]:
        """The ``limit`` most confident active heuristics for ``niche`` (niche-specific first on ties)."""
        ranked = sorted(self.active(niche=niche), key=lambda h: (-h.confidence, h.scope.get("niche") is None, h.id))
        return ranked[:limit]

    def to_json(self) -> str:
        """Serialise (for storage and export)."""
        return json.dumps({"version": self.version, "heuristics": [asdict(h) for h in self.heuristics.values()]})

    @classmethod
    def from_json(cls, text: str) -> KnowledgeBase:
        """Inverse of :meth:`to_json`."""
        data = json.loads(text)
        kb = cls(version=int(data.get("version", 0)))
        for row in data.get("heuristics", []):
            h = Heuristic(**row)
            kb.heuristics[h.id] = h
        return kb


class KnowledgeStore(Protocol):
    """Where a search's knowledge base lives between rounds (and across restarts)."""

    def load(self) -> KnowledgeBase:
        """The latest saved knowledge base (empty if none)."""
        ...

    def save(self, kb: KnowledgeBase, round_no: int) -> None:
        """Persist ``kb`` as the state after ``round_no``."""
        ...


class StudyAttrStore:
    """Keeps the knowledge base as JSON in the study's user attributes (same storage as the trials).

    Args:
        study: the Optuna study of the search.
    """

    ATTR = "coevo.kb"

    def __init__(self, study: optuna.Study) -> None:
        self.study = study

    def load(self) -> KnowledgeBase:
        text = self.study.user_attrs.get(self.ATTR)
        return KnowledgeBase.from_json(text) if text else KnowledgeBase()

    def save(self, kb: KnowledgeBase, round_no: int) -> None:
        self.study.set_user_attr(self.ATTR, kb.to_json())
        self.study.set_user_attr(self.ATTR + ".round", round_no)
