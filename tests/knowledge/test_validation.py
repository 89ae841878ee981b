"""The validation loop: proposals that keep losing refute what they cite; winners validate it."""

from __future__ import annotations

import re

from coevo.knowledge import KnowledgeBase
from coevo.knowledge.heuristics import STATUS_MEANING
from coevo.knowledge.validation import MIN_CITED, apply, outcomes, records
from coevo.search.nb201 import NB201Problem
from coevo.search.proposers import Evaluation

PROBLEM = NB201Problem(dataset="cifar10", device="fpga")


def _ev(n: int, acc: float, lat: float, rnd: int, cited: tuple[str, ...] = ()) -> Evaluation:
    cell = (n % 5, (n // 5) % 5, (n // 25) % 5, 1, 2, 3)
    return Evaluation(n, cell, str(n), {"accuracy": acc, "latency_ms": lat}, True, {"round": rnd, "niche": "n", "heuristics": list(cited)})


def _history() -> list[Evaluation]:
    evs = [_ev(k, 90.0 - k, 1.0 + k, 0) for k in range(5)]  # round-0 front: (90,1) (89,2) ...
    n = 5
    for rnd in (1, 2):
        for k in range(5):
            evs.append(_ev(n, 95.0 + rnd + k * 0.01, 1.0 + k * 0.01, rnd, ("H1",)))  # beats the front: wins
            n += 1
            evs.append(_ev(n, 50.0, 9.0 + k, rnd, ("H2",)))  # dominated: loses
            n += 1
            evs.append(_ev(n, 91.0 + k * 0.001, 0.5 + k, rnd))  # uncited, half of them win
            n += 1
    return evs


def _kb() -> KnowledgeBase:
    kb = KnowledgeBase()
    for key in ("good", "bad", "person", "few"):
        kb.upsert(key, 0, text=key, scope={}, confidence=0.6)
    kb.heuristics["H3"].status = "accepted"
    return kb


def test_outcomes_compare_with_the_niche_front_before_the_round() -> None:
    out = {o.trial: o for o in outcomes(PROBLEM, _history())}
    assert all(o.round >= 1 for o in out.values())  # the first round has no earlier front
    assert out[5].win and out[5].margin is not None and out[5].margin > 0
    assert not out[6].win and out[6].margin is not None and out[6].margin < 0


def test_losers_become_unhelpful_and_winners_validate_but_a_person_decides_last() -> None:
    evs = _history()
    recs = records(outcomes(PROBLEM, evs))
    assert recs["H1"].n == recs["H2"].n == 10 >= MIN_CITED and recs["H1"].wins == 10 and recs["H2"].wins == 0
    kb = _kb()
    changes, rows = apply(kb, recs, study="s", round_no=2)
    # losing proposals say the claim does not help the search, not that it is false: "unhelpful", never "refuted"
    assert kb.heuristics["H1"].status == "validated" and kb.heuristics["H2"].status == "unhelpful"
    assert not kb.heuristics["H2"].active and STATUS_MEANING["unhelpful"] != STATUS_MEANING["refuted"]
    assert kb.heuristics["H2"].confidence < 0.6 < kb.heuristics["H1"].confidence
    assert any(c.startswith("unhelpful H2") for c in changes)
    assert re.search(r"0/10 citing proposals extended their niche's front vs base rate \d+%", kb.heuristics["H2"].note)
    assert kb.heuristics["H1"].text == "good" and kb.heuristics["H2"].text == "bad"  # the claims' own words stay
    # a winning record later does not validate a claim already found unhelpful
    again = {"H2": recs["H1"]}
    apply(kb, again, study="s", round_no=3)
    assert kb.heuristics["H2"].status == "unhelpful"
    assert {(r.hid, r.kind) for r in rows} == {("H1", "support"), ("H2", "refute")} and len(rows) == 20
    # the same losing record on a heuristic a person accepted: the status stands
    person = {"H3": recs["H2"]}
    person["H3"].hid = "H3"
    apply(kb, person, study="s", round_no=2)
    assert kb.heuristics["H3"].status == "accepted"


def test_too_few_citations_change_nothing() -> None:
    evs = [e for e in _history() if e.attrs["round"] == 0 or e.trial_number < 9]
    recs = records(outcomes(PROBLEM, evs))
    kb = _kb()
    apply(kb, recs, study="s", round_no=1)
    assert all(h.status == "proposed" for h in kb.heuristics.values() if h.id != "H3")
