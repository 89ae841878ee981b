"""The validation loop: proposals that cite a heuristic are its test.

After each round, every paid evaluation proposed in round r >= 1 is scored against the
front of its niche *before* round r (the paid evaluations of the same niche from earlier
rounds): it **wins** when no earlier evaluation of the niche dominates it (it extends the
niche's front), and its **margin** is its accuracy minus the best earlier accuracy of the
niche at no higher latency (positive: it beat that front point).

Rule (applied to every heuristic cited by at least :data:`MIN_CITED` evaluated proposals):

* ``w`` wins of ``n`` citing proposals, against the base rate ``b`` = win rate of the
  proposals in the same niches and rounds that did not cite it (with a half-count prior).
* ``p = P(win rate > b)`` under a Beta(1 + w, 1 + n - w) posterior.
* ``p <= 0.05``: its proposals keep losing -> ``unhelpful`` (not ``refuted``: this loop tests
  whether following a claim helps the search, not whether the claim is true; a claim whose
  effect is real can still stop paying once the front holds it everywhere). ``p >= 0.95``:
  they keep winning -> ``validated``. Otherwise the status stays as the reasoner set it.
  An unhelpful or refuted heuristic is not validated again by this loop.
* confidence := mean of the reasoner's confidence and ``p``.
* The note of a heuristic made unhelpful here gives the record (``w/n citing proposals
  extended their niche's front vs base rate b``); its text keeps the claim's own figure.
* A person's decision (accepted, rejected) is never changed; confidence still moves.

Each citing proposal also becomes an evidence row (source ``record``): support when it
won, refute when it lost, with its margin as the effect size.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from coevo.knowledge.heuristics import HUMAN, KnowledgeBase
from coevo.knowledge.store import EvidenceRow
from coevo.search.problem import Problem
from coevo.search.proposers import Evaluation

MIN_CITED = 6
REFUTE_P = 0.05
VALIDATE_P = 0.95


@dataclass(frozen=True)
class Outcome:
    """How one proposal did against its niche's earlier front."""

    trial: int
    round: int
    niche: str
    win: bool
    margin: float | None
    cited: tuple[str, ...]


@dataclass
class Record:
    """The proposals that cited one heuristic, and how they did."""

    hid: str
    wins: int = 0
    n: int = 0
    base_wins: int = 0
    base_n: int = 0
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def win_rate(self) -> float | None:
        """Wins / citing proposals (None without any)."""
        return self.wins / self.n if self.n else None

    @property
    def base_rate(self) -> float:
        """Win rate of the non-citing proposals of the same niches and rounds (half-count prior)."""
        return (self.base_wins + 0.5) / (self.base_n + 1.0)

    @property
    def p_better(self) -> float | None:
        """Posterior probability that citing proposals win more often than the base rate."""
        if self.n == 0:
            return None
        from scipy import stats  # lazy: scipy.stats costs ~1.5 s of every coevo start-up

        return float(stats.beta.sf(self.base_rate, 1 + self.wins, 1 + self.n - self.wins))


def outcomes(problem: Problem, evaluations: Sequence[Evaluation]) -> list[Outcome]:
    """Win/loss of every paid evaluation proposed after the first round (see module doc)."""
    acc_name, lat_name = problem.front_objectives
    paid = [e for e in evaluations if e.query and "niche" in e.attrs and "round" in e.attrs]
    out = []
    by_niche: dict[str, list[Evaluation]] = defaultdict(list)
    for e in paid:
        by_niche[str(e.attrs["niche"])].append(e)
    for niche, group in by_niche.items():
        rounds = np.array([int(e.attrs["round"]) for e in group])
        acc = np.array([e.values[acc_name] for e in group])
        lat = np.array([e.values[lat_name] for e in group])
        for k, e in enumerate(group):
            r = int(rounds[k])
            if r < 1:
                continue
            earlier = rounds < r
            if not earlier.any():
                out.append(Outcome(e.trial_number, r, niche, True, None, tuple(e.attrs.get("heuristics") or ())))
                continue
            ea, el = acc[earlier], lat[earlier]
            dominated = bool(np.any((ea >= acc[k]) & (el <= lat[k]) & ((ea > acc[k]) | (el < lat[k]))))
            faster = ea[el <= lat[k]]
            margin = float(acc[k] - faster.max()) if len(faster) else None
            out.append(Outcome(e.trial_number, r, niche, not dominated, margin, tuple(e.attrs.get("heuristics") or ())))
    out.sort(key=lambda o: o.trial)
    return out


def records(results: Sequence[Outcome]) -> dict[str, Record]:
    """Per cited heuristic id: its proposals' wins and the base rate of its niches and rounds."""
    recs: dict[str, Record] = {}
    for o in results:
        for hid in o.cited:
            rec = recs.setdefault(hid, Record(hid))
            rec.n += 1
            rec.wins += o.win
            rec.outcomes.append(o)
    for hid, rec in recs.items():
        cells = {(o.niche, o.round) for o in rec.outcomes}
        base = [o for o in results if (o.niche, o.round) in cells and hid not in o.cited]
        rec.base_n = len(base)
        rec.base_wins = sum(o.win for o in base)
    return recs


def apply(kb: KnowledgeBase, recs: dict[str, Record], *, study: str, round_no: int) -> tuple[list[str], list[EvidenceRow]]:
    """Update statuses and confidences of ``kb`` from ``recs`` (the rule in the module doc).

    Returns:
        one line per status change (for the round log) and the evidence rows to store.
    """
    changes: list[str] = []
    rows: list[EvidenceRow] = []
    for hid, rec in recs.items():
        h = kb.heuristics.get(hid)
        if h is None:
            continue  # cited under an id that is gone (e.g. another knowledge base's)
        rows += [EvidenceRow(hid, study, o.trial, "support" if o.win else "refute", "record", o.margin, o.round) for o in rec.outcomes]
        p = rec.p_better
        if rec.n < MIN_CITED or p is None:
            continue
        summary = f"{rec.wins}/{rec.n} citing proposals extended their niche's front vs base rate {rec.base_rate:.0%}, P(better)={p:.2f}"
        h.confidence = round(0.5 * h.confidence + 0.5 * p, 4)
        if h.status in HUMAN:
            continue
        new = "unhelpful" if p <= REFUTE_P else "validated" if p >= VALIDATE_P and h.status not in ("refuted", "unhelpful") else None
        if new and new != h.status:
            h.status = new  # type: ignore[assignment]
            h.note = f"{new} by the validation loop: {summary}"
            changes.append(f"{new} {hid}: {h.text} ({summary})")
        elif not h.note:
            h.note = f"record: {summary}"
    return changes, rows
