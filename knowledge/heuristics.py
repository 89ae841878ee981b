"""Heuristics: the record of one claim, and the working copy a reasoner edits.

A heuristic is a claim about the design space ("edge_1_2=nor_conv_3x3 (vs other edge_1_2
values) raises accuracy by 2.1 ± 0.7 pp"), with its scope, a structured form where one
exists, a confidence, a status, its author (which reasoner) and evidence (trial numbers that
support or refute it). :class:`KnowledgeBase` is the in-memory working copy a reasoner edits
in a round; it is persisted between rounds in the versioned store of :mod:`knowledge.store`.

Claims of the kind ``param_value_effect`` (one parameter value's effect on one objective)
have their words written by :func:`effect_text` from the structured form alone, so the text
and the stored figure cannot disagree. Effects are differences: an effect on an objective
measured in ``%`` is in percentage points (``pp``, :func:`effect_unit`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["proposed", "validated", "unhelpful", "refuted", "retired", "accepted", "rejected"]
STATUSES: tuple[str, ...] = ("proposed", "validated", "unhelpful", "refuted", "retired", "accepted", "rejected")
INACTIVE: frozenset[str] = frozenset({"unhelpful", "refuted", "retired", "rejected"})
"""Statuses never put in prompts or used to guide proposals."""
STATUS_MEANING: dict[str, str] = {
    "proposed": "a claim written by a reasoner that has not yet passed either test below",
    "validated": "the claim's effect was measured with |t| >= 4 on >= 15 evaluations a side, or the proposals citing it "
    "extend their niche's front more often than the others (P >= 0.95)",
    "unhelpful": "the claim may well be true, but proposals that follow it extend their niche's front less often than "
    "the others (P <= 0.05): it no longer guides the search",
    "refuted": "the claim is false on the evidence: re-measured, its 95 % interval contains 0 or its sign flipped",
    "retired": "set aside by a person or a model (kept for the record, not used)",
    "accepted": "a person reviewed it and keeps it in prompts; no automatic rule changes it",
    "rejected": "a person reviewed it and keeps it out of prompts; no automatic rule changes it",
}
"""What each status means (``coevo kb show``, the review report and docs/engine.md say the same)."""
HUMAN: frozenset[str] = frozenset({"accepted", "rejected"})
"""Statuses only a person sets; no reasoner or automatic rule overrides them."""


ORIGIN_KEYS = ("part", "from")
"""What an imported heuristic's scope and claim say of where it came from (:func:`knowledge.exchange.onto_part`): a
part of a composed problem and the problem it was learned on. :meth:`KnowledgeBase.upsert` keeps them through any
rewrite of the scope or the claim (a re-measurement in the joint study changes the figures, never the origin)."""


def origin_of(mapping: Mapping[str, Any] | None) -> dict[str, Any]:
    """The :data:`ORIGIN_KEYS` of ``mapping`` (none where it is None or has none)."""
    return {k: mapping[k] for k in ORIGIN_KEYS if mapping is not None and k in mapping}


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
        status: one of :data:`STATUSES` (their meanings: :data:`STATUS_MEANING`).
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
        """True unless unhelpful, refuted, retired or rejected."""
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
            if name in ("scope", "structured") and isinstance(value, dict):
                value = {**value, **origin_of(getattr(h, name))}  # a rewrite keeps where an imported claim came from
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


def model_claim(existing: Heuristic | None, status: str, confidence: float) -> tuple[Status, float]:
    """The status and confidence a model may write for a heuristic it creates or revises (an LLM reasoner's knowledge update).

    A model's word is not evidence: what it writes starts ``proposed`` with no confidence (0), and
    only evidence raises either: the validation loop (:mod:`knowledge.validation`) promotes a
    heuristic whose citing proposals keep winning and moves its confidence towards their record,
    and the offline reasoner writes what it measured. So a model may keep ``validated`` only on a
    heuristic already validated, never raise a confidence (a revision keeps at most the one it
    had), and may lower either (``refuted``, ``retired``, a smaller confidence).

    Args:
        existing: the heuristic the model revises (None: it creates one).
        status: the status the model asked for (proposed, validated, refuted or retired).
        confidence: the confidence it asked for (0..1).

    >>> model_claim(None, "validated", 0.99)
    ('proposed', 0.0)
    """
    before: Status | None = existing.status if existing is not None else None
    granted: Status = "proposed" if status == "validated" and before != "validated" else status  # type: ignore[assignment]
    ceiling = existing.confidence if existing is not None else 0.0
    return granted, round(max(0.0, min(confidence, ceiling)), 4)


EFFECT_KEYS: frozenset[str] = frozenset({"effect", "ci95", "claimed_effect"})
"""Structured fields that are differences in the objective's unit (see :func:`effect_unit`)."""


def sig(x: float, digits: int = 3) -> str:
    """``x`` rounded to ``digits`` significant digits, without exponent for everyday magnitudes.

    Example:
        >>> sig(2.0999999), sig(-0.43785), sig(14.44), sig(12345.0), sig(0.0)
        ('2.10', '-0.438', '14.4', '12300', '0')
    """
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    exponent = math.floor(math.log10(abs(x)))
    if exponent < -4 or exponent >= 9:
        return f"{x:.{digits - 1}e}"
    decimals = digits - 1 - exponent
    rounded = round(x, decimals)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > exponent:  # 9.996 -> 10.0: one digit fewer after the point
        decimals -= 1
        rounded = round(x, decimals)
    return f"{rounded:.{max(0, decimals)}f}"


def effect_unit(unit: str) -> str:
    """Unit of a difference of two values measured in ``unit``: percentage points for ``%``."""
    return "pp" if unit.strip() == "%" else unit


def with_unit(value: str, unit: str) -> str:
    """``value`` followed by ``unit`` (nothing for an empty unit)."""
    return f"{value} {unit}" if unit else value


def effect_text(s: Mapping[str, Any]) -> str:
    """The words of a ``param_value_effect`` claim, from its structured form alone.

    ``s`` holds ``objective``, ``unit`` (the objective's), ``param``, ``value``, ``niche``
    (None for the whole space), ``effect`` (mean with the value minus mean with any other
    value of the parameter), ``ci95`` (half-width), ``n_with`` and ``n_without``. A claim
    refuted by re-measurement also holds ``claimed_effect`` (the effect it used to claim)
    and ``refuted`` (why); then ``effect``, ``ci95`` and the counts are the refuting
    measurement.

    Example:
        >>> effect_text({"objective": "accuracy", "unit": "%", "param": "edge_1_2", "value": "nor_conv_1x1",
        ...              "niche": None, "effect": 2.1, "ci95": 0.71, "n_with": 5, "n_without": 6})
        'edge_1_2=nor_conv_1x1 (vs other edge_1_2 values) raises accuracy by 2.10 ± 0.71 pp (95% CI; 5 vs 6 evaluations)'
        >>> effect_text({"objective": "latency_ms", "unit": "ms", "param": "edge_2_3", "value": "nor_conv_1x1", "niche": None,
        ...              "effect": 0.3, "ci95": 0.66, "n_with": 37, "n_without": 167, "claimed_effect": -1.3,
        ...              "refuted": "the 95% CI contains 0"})  # doctest: +NORMALIZE_WHITESPACE
        'refuted: edge_2_3=nor_conv_1x1 (vs other edge_2_3 values) was claimed to lower latency_ms; re-measured +0.300 ± 0.66 ms
         (95% CI; 37 vs 167 evaluations): the 95% CI contains 0'
    """
    unit = effect_unit(str(s.get("unit", "")))
    subject = f"{s['param']}={s['value']} (vs other {s['param']} values)"
    where = f" in niche {s['niche']}" if s.get("niche") else ""
    counts = f"(95% CI; {s['n_with']} vs {s['n_without']} evaluations)"
    if "claimed_effect" in s:
        claimed = "raise" if float(s["claimed_effect"]) > 0 else "lower"
        sign = "+" if float(s["effect"]) > 0 else ""
        measured = with_unit(f"{sign}{sig(float(s['effect']), 3)} ± {sig(float(s['ci95']), 2)}", unit)
        why = f": {s['refuted']}" if s.get("refuted") else ""
        return f"refuted: {subject} was claimed to {claimed} {s['objective']}{where}; re-measured {measured} {counts}{why}"
    verb = "raises" if float(s["effect"]) > 0 else "lowers"
    size = with_unit(f"{sig(abs(float(s['effect'])), 3)} ± {sig(float(s['ci95']), 2)}", unit)
    return f"{subject} {verb} {s['objective']} by {size}{where} {counts}"


def quantity_label(name: str, unit: str, *, what: str = "") -> str:
    """``name what (unit)`` for axes and column headers, without saying the unit twice.

    Example:
        >>> quantity_label("latency_ms", "ms"), quantity_label("accuracy", "%"), quantity_label("share", "")
        ('latency (ms)', 'accuracy (%)', 'share')
        >>> quantity_label("latency_ms", "ms", what="band")
        'latency band (ms)'
    """
    suffix = "_" + unit.strip().lower().replace(" ", "_")
    shown = name[: -len(suffix)] if unit and name.lower().endswith(suffix) and len(name) > len(suffix) else name
    shown = f"{shown} {what}" if what else shown
    return f"{shown} ({unit})" if unit else shown


STRUCTURED_ORDER: tuple[str, ...] = (
    "kind",
    "objective",
    "param",
    "value",
    "niche",
    "effect",
    "ci95",
    "n_with",
    "n_without",
    "claimed_effect",
    "refuted",
    "unit",
)
"""The order :func:`format_structured` shows the fields of a claim in (others follow, as stored)."""


def format_structured(s: Mapping[str, Any]) -> str:
    """A structured form for people: numbers to 3 significant digits, effects with their unit.

    Example:
        >>> format_structured({"unit": "%", "n_with": 5, "effect": 2.0999999, "ci95": 0.7, "objective": "accuracy"})
        'objective accuracy, effect +2.10 pp, ci95 ± 0.700 pp, n_with 5, unit %'
    """
    unit = effect_unit(str(s.get("unit", "")))
    keys = [k for k in STRUCTURED_ORDER if k in s] + [k for k in s if k not in STRUCTURED_ORDER]
    parts = []
    for key in keys:
        value = s[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            shown = "any" if value is None and key == "niche" else str(value)
        elif isinstance(value, int):
            shown = str(value)
        elif key in EFFECT_KEYS:
            shown = with_unit(("± " if key == "ci95" else "+" if value > 0 else "") + sig(value), unit)
        else:
            shown = sig(value)
        parts.append(f"{key} {shown}")
    return ", ".join(parts)
