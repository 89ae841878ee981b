"""Surrogate trust: predictions made before paying, checked against the values paid."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from scipy import stats

from coevo.agent.coevolution import TRUST_FLOOR, surrogate_trust
from coevo.knowledge.report import write_report
from coevo.search.nb201 import NB201Problem
from coevo.search.proposers import Evaluation
from coevo.search.round_log import RoundLogs
from coevo.search.runner import run_search


def _ev(k: int, round_no: int, predicted: float | None, value: float) -> Evaluation:
    attrs: dict[str, object] = {"round": round_no}
    if predicted is not None:
        attrs["predicted"] = predicted
    return Evaluation(k, (k,), str(k), {"accuracy": value, "latency_ms": 1.0}, True, attrs)


def test_trust_is_the_rank_correlation_of_the_last_round_and_acts_when_low() -> None:
    good = [_ev(k, 2, float(k), 50.0 + k) for k in range(6)]
    bad = [_ev(10 + k, 3, float(k), 60.0 - k) for k in range(6)]  # ranked backwards
    unpredicted = [_ev(20 + k, 3, None, 70.0) for k in range(3)]
    assert surrogate_trust(unpredicted, 4, "accuracy") is None
    t = surrogate_trust([*good, *bad, *unpredicted], 4, "accuracy")
    assert t is not None and t["of_round"] == 3 and t["n"] == 6
    assert t["rho"] == pytest.approx(-1.0) and t["low"] and str(TRUST_FLOOR) in t["action"]
    pooled = stats.spearmanr([float(e.attrs["predicted"]) for e in good + bad], [e.values["accuracy"] for e in good + bad]).statistic
    assert t["pooled_rho"] == pytest.approx(pooled)
    t = surrogate_trust([*good, *bad[:4]], 4, "accuracy")  # 4 predictions: too few to act on
    assert t is not None and not t["low"] and t["action"] == ""
    t = surrogate_trust(good, 3, "accuracy")
    assert t is not None and t["rho"] == pytest.approx(1.0) and not t["low"]


@pytest.mark.slow  # 11 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_pelnas_logs_trust_every_round_from_what_it_predicted(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 't.db'}"
    result = run_search(NB201Problem(dataset="cifar10", device="fpga"), "pelnas", budget=100, seed=0, storage=storage)
    trials = optuna.load_study(study_name=result.study, storage=storage).get_trials(deepcopy=False)
    logs = RoundLogs(storage).read(result.study)
    checked = 0
    for round_no, log in logs.items():
        if "trust" not in log or log["trust"]["rho"] is None:
            continue
        of = [t for t in trials if t.user_attrs.get("round") == round_no - 1 and "predicted" in t.user_attrs]
        expected = stats.spearmanr([t.user_attrs["predicted"] for t in of], [t.values[0] for t in of]).statistic
        assert log["trust"]["n"] == len(of) and log["trust"]["rho"] == pytest.approx(expected)
        checked += 1
    assert checked >= 2
    # the review report shows the same figures, round by round
    write_report(storage, result.study, tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Predictor trust per round" in md
    shown = [(r, log["trust"]) for r, log in sorted(logs.items()) if log.get("trust", {}).get("rho") is not None]
    for r, t in shown:
        assert f"| {r} | {r - 1} | the search's predictor (search/informed.py) | {t['n']} | {t['rho']:.2f} | {t['pooled_rho']:.2f} |" in md
