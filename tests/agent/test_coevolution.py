from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import optuna
import pytest

from coevo.agent.coevolution import make_pelnas
from coevo.agent.reasoners import KnowledgeContext, OfflineReasoner
from coevo.knowledge import KnowledgeBase, retrieval
from coevo.knowledge.store import KnowledgeStore
from coevo.search.metrics import pareto_mask
from coevo.search.nb201 import NB201Problem, random_cell
from coevo.search.nb201.problem import complexity_niches
from coevo.search.niches import niche_of
from coevo.search.proposers import Evaluation
from coevo.search.round_log import RoundLogs
from coevo.search.runner import run_search
from tests.helpers import coevo_env, kill_after_trials


def _evidence(problem: NB201Problem, n: int, seed: int = 0) -> list[Evaluation]:
    import random

    rng = random.Random(seed)
    cells = {random_cell(rng) for _ in range(n)}
    return [Evaluation(k, c, problem.point_id(c), problem.evaluate(c), True, {"round": 0}) for k, c in enumerate(sorted(cells))]


def test_offline_reasoner_mines_true_effects() -> None:
    problem = NB201Problem(dataset="cifar10", device="fpga")
    evidence = _evidence(problem, 200)
    kb = KnowledgeBase()
    ctx = KnowledgeContext(problem, complexity_niches(), 1, tuple(evidence))
    changes = OfflineReasoner().update_knowledge(kb, evidence, ctx)
    assert changes and all(c.startswith("created H") for c in changes)
    # 'none' on the only direct input->output edge disconnects many cells: a large accuracy loss
    h = kb.by_key("pv:accuracy:edge_0_3:none:*")
    assert h is not None and h.structured and h.structured["effect"] < 0 and h.confidence > 0.95
    assert "lowers accuracy" in h.text and h.support and h.author == "offline"
    assert all(t in {e.trial_number for e in evidence} for t in h.support + h.refute)
    # 3x3 convolutions cost latency
    lat = kb.by_key("pv:latency_ms:edge_0_3:nor_conv_3x3:*")
    assert lat is not None and lat.structured and lat.structured["effect"] > 0


def test_refutation_and_human_decisions() -> None:
    problem = NB201Problem(dataset="cifar10", device="fpga")
    evidence = _evidence(problem, 200)
    ctx = KnowledgeContext(problem, complexity_niches(), 1, tuple(evidence))
    kb = KnowledgeBase()
    reasoner = OfflineReasoner()
    reasoner.update_knowledge(kb, evidence, ctx)
    claim = kb.by_key("pv:accuracy:edge_0_3:none:*")
    assert claim is not None
    claim.status = "rejected"  # a person rejected it
    planted, _ = kb.upsert(
        "pv:accuracy:edge_0_1:skip_connect:*",
        0,
        text="planted false claim",
        scope={},
        author="offline",
        structured={
            "kind": "param_value_effect",
            "objective": "accuracy",
            "param": "edge_0_1",
            "value": "skip_connect",
            "niche": None,
            "effect": -50.0,
            "ci95": 1.0,
        },
    )
    reasoner.update_knowledge(kb, evidence, KnowledgeContext(problem, complexity_niches(), 2, tuple(evidence)))
    assert kb.by_key("pv:accuracy:edge_0_3:none:*").status == "rejected"  # type: ignore[union-attr]
    assert planted.status == "refuted" and planted.confidence == 0.0
    assert all(h.id != planted.id for h in retrieval.rank(kb.heuristics.values(), {}, None))


@pytest.mark.slow  # 23 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_pelnas_round_records_and_ablations(storage: str) -> None:
    problem = NB201Problem(dataset="cifar10", device="raspi4")
    full = run_search(problem, "pelnas", budget=72, seed=0, storage=storage)
    nokb = run_search(problem, "pelnas-nokb", budget=72, seed=0, storage=storage)
    nonich = run_search(problem, "pelnas-noniche", budget=72, seed=0, storage=storage)
    nosur = run_search(problem, "pelnas-nosurrogate", budget=72, seed=0, storage=storage)
    for r in (full, nokb, nonich, nosur):
        assert r.evaluations == 72 and r.trials == 72
    s = optuna.load_study(study_name=full.study, storage=storage)
    assert KnowledgeStore.for_storage(storage).latest(full.study)
    logs = [RoundLogs(storage).read(full.study)[k] for k in range(3)]
    assert not any(k.startswith("coevo.rounds.") for k in s.user_attrs)  # round logs live in their own table
    assert logs[0]["initial"] and logs[1]["allocation"] and sum(logs[1]["allocation"].values()) == 8  # 72 / ROUNDS_PER_BUDGET, up
    assert any(t.user_attrs.get("heuristics") for t in s.trials)
    s_nokb = optuna.load_study(study_name=nokb.study, storage=storage)
    assert not KnowledgeStore.for_storage(storage).exists(nokb.study) and not any(t.user_attrs.get("heuristics") for t in s_nokb.trials)
    # each ablation removes one part: nokb keeps the surrogate's ranking, nosurrogate keeps the knowledge base
    guided = [t for t in s_nokb.trials if t.user_attrs.get("round", 0) > 0]
    assert guided and all("predicted" in t.user_attrs["rationale"] for t in guided)
    s_sur = optuna.load_study(study_name=nosur.study, storage=storage)
    assert all("predicted" not in t.user_attrs["rationale"] for t in s_sur.trials)
    assert KnowledgeStore.for_storage(storage).latest(nosur.study) and any(t.user_attrs.get("heuristics") for t in s_sur.trials)
    s_non = optuna.load_study(study_name=nonich.study, storage=storage)
    assert {t.user_attrs["niche"] for t in s_non.trials} == {"all"}
    # every niche with designs on the true front (in the HV region) is explored; at 72 evaluations the rounds are too small
    # for the per-niche floor (search.niches.allocate), so a niche without any (here conv0: its best cell, 86.8 %, is
    # dominated by faster ones) may be left alone
    table, niches = problem.table, complexity_niches()
    accuracy, latency = table.acc(problem.dataset), problem.cheap_values([table.cell(i) for i in range(len(table.acc(problem.dataset)))])
    on_front = np.flatnonzero(pareto_mask(accuracy, latency["latency_ms"]) & (accuracy > problem.floor))
    useful = {niche_of(niches, table.cell(int(i))) for i in on_front}
    counts = full.exploration["niches"]
    assert len(useful) >= 4 and all(counts[nid] >= 4 for nid in useful)


@pytest.mark.slow  # 10 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_resume_mid_round_keeps_waiting_proposals(storage: str) -> None:
    problem = NB201Problem(dataset="cifar10", device="fpga")
    proposer = make_pelnas("pelnas", round_size=20)
    run_search(problem, proposer, budget=30, seed=0, storage=storage, study_name="m")
    study = optuna.load_study(study_name="m", storage=storage)
    study.enqueue_trial(problem.to_params(random_cell(__import__("random").Random(5))), user_attrs={"round": 2, "rationale": "left over"})
    result = run_search(problem, make_pelnas("pelnas", round_size=20), budget=70, seed=0, storage=storage, study_name="m")
    trials = optuna.load_study(study_name="m", storage=storage).trials
    ids = [t.user_attrs["point_id"] for t in trials if t.state.name == "COMPLETE" and t.user_attrs["query"]]
    assert result.evaluations == 70 == len(set(ids))
    assert any(t.user_attrs.get("rationale") == "left over" for t in trials)  # the waiting proposal was evaluated, not dropped


@pytest.mark.slow  # 18 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_sigkill_during_pelnas_then_resume(tmp_path: Path) -> None:
    db = tmp_path / "k.sqlite3"
    cmd = [
        "search",
        "--device",
        "pixel3",
        "--proposer",
        "pelnas",
        "--budget",
        "200",
        "--storage",
        f"sqlite:///{db}",
        "--study",
        "k",
        "--json",
    ]
    kill_after_trials(cmd, db, 70, tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "coevo.agent.cli", *cmd], capture_output=True, text=True, cwd=tmp_path, env=coevo_env(), timeout=300
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    study = optuna.load_study(study_name="k", storage=f"sqlite:///{db}")
    ids = [t.user_attrs["point_id"] for t in study.trials if t.state.name == "COMPLETE" and t.user_attrs["query"]]
    assert data["evaluations"] == 200 == len(ids) == len(set(ids))
    assert data["reasoner"] == "offline (no LLM)"
    assert np.isfinite(data["hv_ratio"])


@pytest.mark.slow  # 9 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_a_guided_round_takes_its_niches_in_turn(tmp_path: Path) -> None:
    # a round cut short (a budget that ends inside it) has paid for each niche's first pick, not for the first niches alone
    storage = f"sqlite:///{tmp_path / 's.db'}"
    problem = NB201Problem(dataset="cifar10", device="fpga")
    result = run_search(problem, "pelnas", budget=100, seed=0, storage=storage)  # a start of 24, then rounds of 10
    study = optuna.load_study(study_name=result.study, storage=storage)
    first_round = [t for t in sorted(study.trials, key=lambda t: t.number) if t.user_attrs.get("round") == 1]
    log = RoundLogs(storage).read(result.study)[1]
    served = [niche for niche, share in log["allocation"].items() if share > 0]
    assert len(served) >= 3 and len(first_round) == 10 and max(log["allocation"].values()) >= 2
    heads = [t.user_attrs["niche"] for t in first_round[: len(served)]]
    assert sorted(heads) == sorted(served)  # one of each served niche before any niche's second
