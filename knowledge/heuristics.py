"""Heuristics: the record of one claim, and the working copy a reasoner edits.

A heuristic is a claim about the design space ("nor_conv_3x3 on edge 1->2 raises cifar10
accuracy by 2.1 ± 0.7 points"), with its scope, a structured form where one exists, a
confidence, a status, its author (which reasoner) and evidence (trial numbers that support
or refute it). :class:`KnowledgeBase` is the in-memory working copy a reasoner edits in a
round; it is persisted between rounds in the versioned store of :mod:`knowledge.store`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["proposed", "validated", "refuted", "retired", "accepted", "rejected"]
STATUSES: tuple[str, ...] = ("proposed", "validated", "refuted", "retired", "accepted", "rejected")
INACTIVE: frozenset[str] = frozenset({"refuted", "retired", "rejected"})
"""Statuses never put in prompts or used to guide proposals."""
HUMAN: frozenset[str] = frozenset({"accepted", "rejected"})
"""Statuses only a person sets; no reasoner or automatic rule overrides them."""


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
        note: why the latest change was made (stored with the version it creates).
        effects: per evidence trial, its signed deviation in the objective's unit (optional).
        origin: ``<kb>:<id>`` of the heuristic this one was imported from, if any.
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
    note: str = ""
    effects: dict[int, float] = field(default_factory=dict)
    origin: str | None = None

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
            # provisional id: the store assigns the final one when it saves (ids are per knowledge base)
            h = Heuristic(id=f"H{self._next_number()}", key=key, created_round=round_no, updated_round=round_no, **fields)
            self.heuristics[h.id] = h
            return h, True
        for name, value in fields.items():
            setattr(h, name, value)
        h.updated_round = round_no
        h.version += 1
        return h, False

    def _next_number(self) -> int:
        numbers = [int(i[1:]) for i in self.heuristics if i[1:].isdigit()]
        return max(numbers, default=0) + 1

    def active(self, *, niche: str | None = None) -> list[Heuristic]:
        """Active heuristics whose scope admits ``niche`` (a heuristic without a niche admits all)."""
        return [h for h in self.heuristics.values() if h.active and h.scope.get("niche") in (None, niche)]

    def to_json(self) -> str:
        """Serialise (for storage and export)."""
        return json.dumps({"version": self.version, "heuristics": [asdict(h) for h in self.heuristics.values()]})

    @classmethod
    def from_json(cls, text: str) -> KnowledgeBase:
        """Inverse of :meth:`to_json`."""
        data = json.loads(text)
        kb = cls(version=int(data.get("version", 0)))
        for row in data.get("heuristics", []):
            h = Heuristic(**{**row, "effects": {int(k): v for k, v in row.get("effects", {}).items()}})
            kb.heuristics[h.id] = h
        return kb
