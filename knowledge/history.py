"""A heuristic's history for people: its changes, with runs of mere re-measurements folded into one entry.

The store keeps every version (:mod:`knowledge.store`): the offline reasoner re-measures each claim
every round, so a 300-evaluation search gives a claim a dozen versions that differ only in the
figure's last digits. A reader wants the changes: creation, every status change, a person's review,
a change of author. Consecutive versions that only re-measured the claim (same status, same writer,
no person involved) are shown as one entry that says how many there were and what the figure and
confidence moved from and to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from coevo.knowledge.store import Version


@dataclass(frozen=True)
class HistoryEntry:
    """One row of a condensed history: a single version, or a run of re-measurements (``first`` .. ``last``)."""

    first: Version
    last: Version
    count: int

    @property
    def versions(self) -> str:
        """``"7"`` or ``"3-14"``."""
        return str(self.first.version) if self.count == 1 else f"{self.first.version}-{self.last.version}"

    @property
    def rounds(self) -> str:
        """``"2"`` or ``"2-13"``."""
        return str(self.first.round) if self.first.round == self.last.round else f"{self.first.round}-{self.last.round}"

    @property
    def confidence(self) -> str:
        """``"0.941"`` or ``"0.941->0.986"``."""
        a, b = self.first.confidence, self.last.confidence
        return f"{a:.3f}" if self.count == 1 or abs(a - b) < 5e-4 else f"{a:.3f}->{b:.3f}"

    @property
    def change(self) -> str:
        """The version's reason, or for a run how many re-measurements and its first and last reasons."""
        if self.count == 1:
            return self.first.change
        return f"re-measured {self.count} times; first: {_reason(self.first)}; last: {_reason(self.last)}"


def _reason(v: Version) -> str:
    """A version's reason without the store's field list (``...; changed text, structured, confidence a->b``)."""
    return v.change.split("; changed ")[0]


def _is_remeasure(v: Version, previous: Version | None) -> bool:
    """True when ``v`` only re-measured the claim: same status and writer as the version before, no person involved."""
    return (
        previous is not None
        and v.status == previous.status
        and v.changed_by == previous.changed_by
        and v.author == previous.author
        and v.changed_by != "human"
    )


def condensed(history: Sequence[Version]) -> list[HistoryEntry]:
    """``history`` (one heuristic's versions, oldest first) with consecutive re-measurements folded (module doc).

    Example:
        >>> from dataclasses import replace
        >>> v = Version("kb", "H1", 1, "k", "t", {}, None, 0.5, "proposed", "offline", None, 0, 0, "created", "offline", 0.0)
        >>> rows = [v, replace(v, version=2, round=1, status="validated", change="measured; changed status"),
        ...         replace(v, version=3, round=2, status="validated", confidence=0.6, change="measured a"),
        ...         replace(v, version=4, round=3, status="validated", confidence=0.7, change="measured b")]
        >>> [(e.versions, e.rounds, e.confidence) for e in condensed(rows)]
        [('1', '0', '0.500'), ('2', '1', '0.500'), ('3-4', '2-3', '0.600->0.700')]
        >>> condensed(rows)[-1].change
        're-measured 2 times; first: measured a; last: measured b'
    """
    out: list[HistoryEntry] = []
    previous: Version | None = None
    run_open = False  # the last entry is a run of re-measurements that may grow
    for v in history:
        if _is_remeasure(v, previous) and run_open:
            out[-1] = HistoryEntry(out[-1].first, v, out[-1].count + 1)
        else:
            out.append(HistoryEntry(v, v, 1))
            run_open = _is_remeasure(v, previous)
        previous = v
    return out
