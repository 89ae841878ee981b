"""Imported heuristics: where each came from, and whether it held where it was brought.

A heuristic imported into a knowledge base (``coevo search --kb-from``, ``coevo kb import``)
carries its provenance in what the store already keeps, so nothing is stored twice:

* ``origin``: ``<knowledge base>:<id>`` of the heuristic it was copied from (the source study
  and its id there);
* its first version: who wrote it (``import from <what --kb-from or kb import named>``: the
  study, or the export file), its status and confidence as imported, and in its change note
  the status it had there when the import changed it (:func:`knowledge.store.import_note`: a
  validated claim must earn validation again);
* its scope: ``from`` (the problem it was learned on) and ``part`` (the part of the composed
  problem it was mapped onto, :func:`knowledge.exchange.onto_part`) when it was learned on a
  part; else it was learned on this knowledge base's own problem.

Whether it held is read from its status now and the evidence of this knowledge base's own
study (the study the knowledge base is named after): evidence an import brought along points
at the source study's trials and does not count (:func:`verdict`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from coevo.knowledge.heuristics import HUMAN
from coevo.knowledge.store import EvidenceRow, KnowledgeStore, Version, import_source, iter_ids, status_there
from coevo.search.errors import UserInputError

HELD: frozenset[str] = frozenset({"validated", "accepted"})
"""Statuses now that say an imported claim held (validated here again, or accepted by a person here)."""
NOT_HELD: frozenset[str] = frozenset({"refuted", "unhelpful", "rejected"})
"""Statuses now that say it did not (false on this study's evidence, of no help to its proposals, or rejected here)."""
VERDICTS: tuple[str, ...] = ("held", "did not hold", "open", "not tested here", "not measurable here", "set aside")
"""What :func:`verdict` says, in the order the report counts them."""


@dataclass(frozen=True)
class Imported:
    """One imported heuristic of a knowledge base: its provenance and how it fared there.

    Attributes:
        hid: its id in this knowledge base.
        text: the claim, as it reads now.
        origin: ``<knowledge base>:<id>`` it was copied from.
        source: what the import named (a study or an export file); None when the store does not say.
        problem: the problem it was learned on.
        part: the part of this knowledge base's composed problem it was mapped onto; None when it
            was learned on this knowledge base's own problem.
        status_there: its status where it came from, when imported.
        status_imported: its status as imported (``validated`` arrives ``proposed``).
        confidence_imported: its confidence as imported (the one it had there).
        status_now: its status now.
        confidence_now: its confidence now.
        support: this study's evidence rows that support it (current verdicts).
        refute: this study's evidence rows that refute it.
        verdict: whether it held here (:func:`verdict`).
    """

    hid: str
    text: str
    origin: str
    source: str | None
    problem: str | None
    part: str | None
    status_there: str
    status_imported: str
    confidence_imported: float
    status_now: str
    confidence_now: float
    support: int
    refute: int
    verdict: str

    def as_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready values (``coevo kb show --json``)."""
        return asdict(self)

    @property
    def mapping(self) -> str:
        """``problem -> part`` for a heuristic mapped onto a part, else the problem alone.

        >>> Imported("H1", "t", "s:H2", "s", "nb201", "cell", "validated", "proposed", .9, "validated", .9, 3, 0, "held").mapping
        'nb201 -> part cell'
        """
        problem = self.problem or "?"
        return f"{problem} -> part {self.part}" if self.part else problem


def verdict(status_imported: str, status_now: str, support: int, refute: int, *, measurable: bool = True) -> str:
    """Whether an imported claim held in the knowledge base it was brought to, from its status and that study's evidence.

    * ``not tested here``: no evidence of this study, and its status is still the imported one
      (also a person's decision brought along: no automatic rule changes it); ``not measurable
      here`` when the claim is about an objective this problem does not have (``measurable``
      False: a quant study's ``avg_bits`` in deploy-cnn), so nothing here can test it;
    * ``held``: validated here (an import arrives at most proposed, so it earned it), or accepted here;
    * ``did not hold``: refuted or unhelpful on this study's evidence, or rejected here;
    * ``set aside``: retired here;
    * ``open``: evidence, but no decision yet (still proposed).

    >>> verdict("proposed", "validated", 12, 1), verdict("proposed", "refuted", 2, 9), verdict("proposed", "proposed", 0, 0)
    ('held', 'did not hold', 'not tested here')
    >>> verdict("proposed", "proposed", 3, 1), verdict("accepted", "accepted", 4, 0)
    ('open', 'not tested here')
    """
    untouched = status_now == status_imported
    if untouched and (support + refute == 0 or status_now in HUMAN):
        return "not tested here" if measurable else "not measurable here"
    if status_now in HELD:
        return "held"
    if status_now in NOT_HELD:
        return "did not hold"
    return "set aside" if status_now == "retired" else "open"


def imported_heuristics(store: KnowledgeStore, kb: str) -> list[Imported]:
    """The imported heuristics of knowledge base ``kb`` (those with an origin), in id order; [] for none."""
    if not store.exists(kb):
        return []
    first: dict[str, Version] = {}
    latest: dict[str, Version] = {}
    for v in store.history(kb):
        if v.hid not in first or v.version < first[v.hid].version:
            first[v.hid] = v
        if v.hid not in latest or v.version > latest[v.hid].version:
            latest[v.hid] = v
    here = _own_evidence(store.evidence(kb), kb)
    measured = _objectives(store.spec(kb))
    out = []
    for hid in iter_ids(latest):
        head, start = latest[hid], first[hid]
        if not head.origin:
            continue
        support, refute = here[(hid, "support")], here[(hid, "refute")]
        out.append(
            Imported(
                hid=hid,
                text=head.text,
                origin=head.origin,
                source=import_source(start),
                problem=_learned_on(start),
                part=start.scope.get("part"),
                status_there=status_there(start),
                status_imported=start.status,
                confidence_imported=start.confidence,
                status_now=head.status,
                confidence_now=head.confidence,
                support=support,
                refute=refute,
                verdict=verdict(start.status, head.status, support, refute, measurable=_about(head, measured)),
            )
        )
    return out


def _objectives(spec: Mapping[str, Any]) -> frozenset[str] | None:
    """The objective names of the problem ``spec`` names (its class's declaration), None when it cannot be loaded here."""
    from coevo.search.problems import problem_class  # search.problems imports problem modules; only a report needs it

    try:
        declared = problem_class(str(spec.get("problem"))).objectives
    except UserInputError:
        return None
    return frozenset(o.name for o in declared) if isinstance(declared, tuple) else None


def _about(head: Version, objectives: frozenset[str] | None) -> bool:
    """Whether ``head``'s claim is about one of ``objectives`` (True when it names none, or they are unknown)."""
    claimed = (head.structured or {}).get("objective")
    return objectives is None or claimed is None or claimed in objectives


def _learned_on(first: Version) -> str | None:
    """The problem a heuristic was learned on: the part's (``from``) when mapped onto a part, else its scope's own."""
    learned = first.scope.get("from", first.scope.get("problem"))
    return None if learned is None else str(learned)


def _own_evidence(rows: Sequence[EvidenceRow], study: str) -> Counter[tuple[str, str]]:
    """(heuristic, support|refute) -> current evidence rows of ``study``'s own trials (imported rows name the source study)."""
    return Counter((e.hid, e.kind) for e in rows if e.study == study)


def provenance_line(item: Imported) -> str:
    """One line of where an imported heuristic came from and how it fared (``coevo kb show``).

    >>> provenance_line(Imported("H4", "t", "src:H2", "src", "nb201", "cell", "validated", "proposed", 0.8,
    ...                          "refuted", 0.1, 1, 6, "did not hold"))
    'imported from src:H2 (nb201 -> part cell), validated 0.80 there; here: refuted 0.10 on 1 support / 6 refute: did not hold'
    """
    via = f" via {item.source}" if item.source and not item.origin.startswith(f"{item.source}:") else ""
    return (
        f"imported from {item.origin}{via} ({item.mapping}), {item.status_there} {item.confidence_imported:.2f} there; "
        f"here: {item.status_now} {item.confidence_now:.2f} on {item.support} support / {item.refute} refute: {item.verdict}"
    )


__all__ = ["HELD", "NOT_HELD", "VERDICTS", "Imported", "imported_heuristics", "provenance_line", "verdict"]
