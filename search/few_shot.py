"""Few-shot mode's last stage: the search goes on over a predictor trained on the queries paid for.

A few-shot search pays for ``budget`` evaluations of the expensive objective like a query
search (the proposer chooses them). Afterwards :func:`predicted_front` fits the problem's
predictor on them (:class:`search.predictor.BoostedSurrogate` on the problem's predictor
features: LightGBM on zero-cost proxies for NB201) and scores more designs with it: every design of the problem's free pool
(:meth:`search.problem.Predictable.free_designs`, e.g. the cells of the shipped proxy table)
when it has one, else ``budget`` designs of an evolutionary search on the predicted objective
with the problem's own operators. The reported set is the Pareto
front of every design seen, under the true values of the paid ones and the predictions of the
others; the caller scores it on the truth (never the search).

When the predictor's out-of-fold rank correlation on the paid designs is below
:data:`TRUST_FLOOR`, its predictions are not reported: the found set is then the paid
designs alone (as in query mode), and the stage says so.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from coevo.search.informed import MIN_LABELS, Evidence, Information, InformedPredictor
from coevo.search.metrics import pareto_mask
from coevo.search.niches import niche_of
from coevo.search.predictor import LGBM_PARAMS, out_of_fold_rho, spearman
from coevo.search.problem import Evolvable, Predictable, Problem
from coevo.search.proposers import Evaluation
from coevo.search.work_progress import report

PREDICTED_BUDGET = 3000
"""Designs the predictor scores in the last stage."""
TRUST_FLOOR = 0.3
"""Out-of-fold Spearman rho below which predictions are not reported."""
GENERATION = 400
"""Designs scored per generation of the predicted search."""
STAGE = "prediction stage"
"""What the stage's progress is reported as (:mod:`search.work_progress`): after the last paid evaluation it runs
for seconds to tens of seconds, and the search's bar has nothing left to count."""
SCORING_SHARE = 0.3
"""Share of the stage's progress reached before the predictor scores designs (fitting and checking it come first)."""


@dataclass
class PredictedStage:
    """What the last stage did.

    Attributes:
        reported: the designs reported (paid ones with their true values, predicted ones with
            the predictor's mean; ``query`` tells them apart).
        scored: designs the predictor scored.
        trust: out-of-fold Spearman rho of the predictor on the paid designs (nan below 6).
        note: one line for the run's notes.
        paid_reported: how many reported designs were paid for.
        information: what the predictor used (free, paid, transferred), when one was built.
    """

    reported: list[Evaluation]
    scored: int
    trust: float
    note: str
    paid_reported: int = 0
    information: Information | None = None


def predicted_front(
    problem: Problem, paid: Sequence[Evaluation], *, seed: int, budget: int | None = None, evidence: Sequence[Evidence] = ()
) -> PredictedStage:
    """Fit the predictor on ``paid`` (and ``evidence``), score more designs with it, and report the front of everything seen.

    ``budget`` (default :data:`PREDICTED_BUDGET`) bounds the designs scored when the problem
    has no free pool and the stage searches. With nothing paid and no transferred label the
    report is the zero-information front: the front under the label-free prior alone.
    """
    budget = PREDICTED_BUDGET if budget is None else budget
    if not isinstance(problem, Evolvable) or not isinstance(problem, Predictable):
        raise TypeError(f"few-shot needs a problem with operators and a label-free prior; {problem.name} has none")
    paid = [e for e in paid if e.query]
    report(f"{STAGE}: fitting the predictor ({len(paid)} paid designs)", 0.0)
    try:
        return _predicted_front(problem, paid, seed, budget, evidence)
    finally:
        report(f"{STAGE}: done", 1.0)


def _predicted_front(problem: Any, paid: list[Evaluation], seed: int, budget: int, evidence: Sequence[Evidence]) -> PredictedStage:
    first = problem.front_objectives[0]
    model = InformedPredictor(problem, paid, seed=seed, evidence=evidence, n_bags=16, params=LGBM_PARAMS)
    if not model.fitted:
        return _unfitted(problem, model, paid, seed, budget)
    y = np.array([e.values[first] for e in paid])
    report(f"{STAGE}: checking the predictor out of fold on the paid designs", SCORING_SHARE / 2)
    trust = out_of_fold_rho(model.features([e.point for e in paid]), y, bounds=problem.objectives[0].bounds, seed=seed, prior_column=-1)
    if not np.isnan(trust) and trust < TRUST_FLOOR:
        note = (
            f"few-shot: the predictor's out-of-fold rank correlation on the {len(paid)} paid designs is {trust:.2f} "
            f"(< {TRUST_FLOOR}): its predictions are not reported; the found set is the paid designs. Spend more queries."
        )
        return PredictedStage(list(paid), 0, trust, note, paid_reported=len(paid))
    score, chosen = _validated_scorer(problem, model, paid, y, trust)
    stage = _PredictedSearch(problem, score, paid, random.Random(seed))
    scored, where = _score(problem, stage, budget)
    reported = stage.front()
    paid_reported = sum(e.query for e in reported)
    note = (
        f"few-shot: {chosen}; a predictor trained on {model.labels} labels ({len(paid)} paid; out-of-fold rank correlation {trust:.2f}) "
        f"scored {scored} more, {where}; "
        f"reported: the {len(reported)} designs of the predicted front ({paid_reported} paid, {len(reported) - paid_reported} "
        "predicted; scored on the truth only afterwards)"
    )
    return PredictedStage(reported, scored, trust, note, paid_reported=paid_reported, information=model.information)


def _validated_scorer(
    problem: Any, model: InformedPredictor, paid: list[Evaluation], y: np.ndarray, trust: float
) -> tuple[Callable[[Sequence[Any]], np.ndarray], str]:
    """The fitted predictor, or the label-free prior when it ranks the paid designs better than the predictor does out of fold.

    With few labels the fit can rank worse than the prior it corrects; the paid designs decide
    (a choice on this study's labels only). The prior is put on the objective's scale by a
    least-squares line on the paid designs, so their true values and the predictions compare.
    """
    # the free prior (the last free column): the stage never pays a proxy computation for a paid design
    prior = np.asarray(problem.free_features([e.point for e in paid])[:, -1], dtype=float)
    known = np.isfinite(prior)
    prior_rho = spearman(prior[known], y[known]) if known.sum() >= 6 else float("nan")
    if model.information.transferred or np.isnan(prior_rho) or np.isnan(trust) or prior_rho <= trust:
        return model.score, f"the predictor ranks the paid designs better out of fold ({trust:.2f}) than the prior does ({prior_rho:.2f})"
    slope, intercept = np.polyfit(prior[known], y[known], 1)
    if slope <= 0:
        return model.score, "the prior's line on the paid designs does not rise: the predictor"

    def line(points: Sequence[Any]) -> np.ndarray:
        p = np.asarray(problem.free_features(list(points))[:, -1], dtype=float)
        return np.where(np.isfinite(p), slope * np.nan_to_num(p) + intercept, -np.inf)

    better = f"the label-free prior ranks the paid designs better ({prior_rho:.2f}) than the predictor out of fold ({trust:.2f})"
    return line, f"{better}: it is reported"


def _score(problem: Any, stage: _PredictedSearch, budget: int) -> tuple[int, str]:
    pool = problem.free_designs()
    if pool is not None:
        return stage.score_pool(pool), "of the free pool"
    return stage.search(budget), "found by searching on its predictions"


def _unfitted(problem: Any, model: InformedPredictor, paid: list[Evaluation], seed: int, budget: int) -> PredictedStage:
    """Too few labels to fit: the zero-information front with nothing paid, else the paid designs alone."""
    if paid or not model.ranks:
        why = f"{model.labels} labels (< {MIN_LABELS}) are too few to fit a predictor" if paid else "nothing ranks designs without a label"
        return PredictedStage(list(paid), 0, float("nan"), f"few-shot: {why}; the found set is the paid designs", paid_reported=len(paid))
    stage = _PredictedSearch(problem, model.score, (), random.Random(seed))
    scored, where = _score(problem, stage, budget)
    reported = [e for e in stage.front() if np.isfinite(e.values[stage.first])]
    source = "an earlier study's model" if model.information.transferred else "the label-free prior"
    note = (
        f"zero-information front: no evaluation was paid; {source} ranked {scored} designs {where}; "
        f"reported: the {len(reported)} designs of the predicted front (scored on the truth only afterwards)"
    )
    return PredictedStage(reported, scored, float("nan"), note, information=model.information)


def _scoring(what: str, share: float) -> None:
    """Report the scoring part of the stage (after fitting and checking the predictor), ``share`` of it done."""
    report(f"{STAGE}: {what}", SCORING_SHARE + (1 - SCORING_SHARE) * share)


class _PredictedSearch:
    """Every design seen in the last stage, with its first objective (true when paid, else predicted) and its cheap second.

    Args:
        problem: the few-shot problem.
        score: the predictor's mean for a list of designs (trained on ``paid``), or its label-free ranking.
        paid: the paid evaluations (seen from the start, with their true values).
        rng: the stage's random generator (random points, crossover, order of the children).
    """

    def __init__(self, problem: Any, score: Callable[[Sequence[Any]], np.ndarray], paid: Sequence[Evaluation], rng: random.Random) -> None:
        self.problem = problem
        self.predict = score
        self.rng = rng
        self.first, self.second = problem.front_objectives
        self.seen: dict[str, tuple[Any, float, float, Evaluation | None]] = {
            e.point_id: (e.point, e.values[self.first], e.values[self.second], e) for e in paid
        }

    def score(self, candidates: list[Any]) -> int:
        """Predict the candidates not seen yet (each once); returns how many were new."""
        problem = self.problem
        fresh: dict[str, Any] = {}
        for c in candidates:
            pid = problem.point_id(c)
            if pid not in self.seen and pid not in fresh:
                fresh[pid] = c
        if not fresh:
            return 0
        pts = list(fresh.values())
        mean = self.predict(pts)
        cheap = problem.cheap_values(pts)[self.second]
        for (pid, p), m, c2 in zip(fresh.items(), mean, cheap, strict=True):
            self.seen[pid] = (p, float(m), float(c2), None)
        return len(fresh)

    def score_pool(self, pool: Sequence[Any]) -> int:
        """Score the whole free pool, in chunks; no search (designs outside it would each cost a feature computation)."""
        scored = 0
        for k in range(0, len(pool), 1000):
            _scoring(f"scoring the free pool, {k:,} of {len(pool):,} designs", k / len(pool))
            scored += self.score(list(pool[k : k + 1000]))
        return scored

    def search(self, budget: int) -> int:
        """Evolve on the predictions until ``budget`` designs are scored or nothing new is reachable; returns the count."""
        scored = self.score([self.problem.random_point(self.rng) for _ in range(min(GENERATION, budget))])
        while scored < budget:
            _scoring(f"searching on the predictions, {scored:,} of {budget:,} designs scored", scored / budget)
            children = self._children(self._parents())
            self.rng.shuffle(children)
            new = self.score(children[: min(GENERATION, budget - scored)])
            if not new:
                break  # nothing new reachable: the space is exhausted
            scored += new
        return scored

    def _parents(self) -> list[Any]:
        """The predicted front, plus the best few of every niche (they keep the search spread out)."""
        rows = list(self.seen.values())
        f1 = np.array([r[1] for r in rows])
        f2 = np.array([r[2] for r in rows])
        parents = [rows[i][0] for i in np.flatnonzero(pareto_mask(f1, f2))]
        niches = self.problem.niches()
        by_niche: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            by_niche.setdefault(niche_of(niches, r[0]), []).append(i)
        for members in by_niche.values():
            parents += [rows[i][0] for i in sorted(members, key=lambda i: -f1[i])[:3]]
        return parents

    def _children(self, parents: list[Any]) -> list[Any]:
        """Unseen neighbours and crossovers of the parents, or a generation of random points when there are none."""
        problem, rng = self.problem, self.rng
        children = [n for p in parents for n in problem.neighbours(p)]
        if len(parents) > 1:
            for _ in range(len(parents) * 4):
                a, b = rng.sample(parents, 2)
                children.append(problem.crossover(a, b, rng))
        children = [c for c in children if problem.point_id(c) not in self.seen]
        return children or [problem.random_point(rng) for _ in range(GENERATION)]

    def front(self) -> list[Evaluation]:
        """The Pareto front of everything seen: paid designs as evaluated, predicted ones with the predictor's mean."""
        rows = list(self.seen.values())
        keep = pareto_mask(np.array([r[1] for r in rows]), np.array([r[2] for r in rows]))
        return [self._evaluation(r) for r, k in zip(rows, keep, strict=True) if k]

    def _evaluation(self, row: tuple[Any, float, float, Evaluation | None]) -> Evaluation:
        point, f1, f2, paid = row
        if paid is not None:
            return paid
        return Evaluation(-1, point, self.problem.point_id(point), {self.first: f1, self.second: f2}, False, {"predicted": True})
