"""One predictor of a problem's expensive objective from everything free, everything paid and earlier studies.

The co-evolution engine ranks candidates with it at every budget, zero included, so its
quality rises with the information it has instead of each source informing the search apart:

* **free**: the problem's encoding (:meth:`search.problem.Evolvable.features`) and, for a
  :class:`search.problem.Predictable` problem, the columns that cost nothing to know
  (:meth:`~search.problem.Predictable.free_features`: NB201's zero-cost proxies of the cells of
  the shipped table and their label-free prior; NaN where a design's would cost a computation);
* **paid**: the values of the expensive objective the search has paid for;
* **transferred**: the paid evaluations of related earlier studies (``--kb-from``,
  :class:`search.transfer.PriorEvidence`). Where the objective carries over unchanged (NB201
  accuracy on the same dataset, another device) they are labels like the paid ones; where it
  does not (another dataset) a model fitted on them becomes one more feature column, and the
  prior the fit corrects.

The learner is :class:`search.predictor.BoostedSurrogate` (a bag of LightGBM models: posterior
samples from bootstrap resamples; missing free features are routed by the trees) when the
problem has a prior or a transfer column to correct and fewer than :data:`TREES_FROM` labels,
else :class:`search.surrogate.TreeSurrogate` (missing free features read :data:`MISSING`; on the
encoding alone it is what the engine ranked with before, unchanged for problems with nothing
else free). With no label at all it still ranks: :meth:`InformedPredictor.score` is then the prior
(or the transferred model). :class:`Information` declares what was used; a search result prints it.
"""

from __future__ import annotations

import random
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from coevo.search.predictor import LGBM_PARAMS, BoostedSurrogate
from coevo.search.problem import Evolvable, Predictable, Problem
from coevo.search.surrogate import TreeSurrogate

if TYPE_CHECKING:  # search.proposers imports the acquisition, which reads predictors
    from coevo.search.proposers._base import Evaluation

ENGINE_LGBM: dict[str, float | int | str] = {**LGBM_PARAMS, "n_estimators": 100, "learning_rate": 0.1}
"""The search's learner: a third of the few-shot stage's trees at twice the rate (the engine refits it every round)."""
TREES_FROM = 150
"""Labels from which the learner is the extra-trees ensemble (64 trees, each a posterior sample) instead of the boosted
line-on-prior correction: with 300 labels on NB201 CIFAR-10 / Raspberry Pi 4 (a development pair) the boosted learner's
8 bags left the engine at HV 0.984 / 0.986 (seeds 0, 1) where extra-trees reached 0.995 / 0.991; at 30 and 100 labels
the two were level within the seeds' spread (issue 29's closing note)."""
MIN_LABELS = 8
"""Labels (paid plus transferred) below which no model is fitted: the predictor ranks by its prior alone."""


class Evidence(Protocol):
    """What the predictor needs of an earlier study (:class:`search.transfer.PriorEvidence` is one)."""

    @property
    def source(self) -> str:
        """What ``--kb-from`` named."""
        ...

    @property
    def evaluations(self) -> tuple[Evaluation, ...]:
        """Its paid evaluations, as points of this problem."""
        ...

    @property
    def shared(self) -> tuple[str, ...]:
        """Objectives whose values carry over unchanged."""
        ...


@dataclass(frozen=True)
class Information:
    """What a predictor (and so a search) used, by kind.

    Attributes:
        free: one phrase per free source (the encoding, free proxy columns, cheap objectives).
        paid: labels of the expensive objective paid for in this study.
        transferred: one phrase per earlier study: how many of its evaluations, and how used.
    """

    free: tuple[str, ...]
    paid: int
    transferred: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        """The declaration as plain data (a search result's ``information``)."""
        return {"free": list(self.free), "paid": self.paid, "transferred": list(self.transferred)}

    def line(self) -> str:
        """One line for a result's notes."""
        other = "; from other studies: " + "; ".join(self.transferred) if self.transferred else "; nothing from other studies"
        return f"information: free: {'; '.join(self.free)}; paid: {self.paid} evaluations of the expensive objective{other}"


def free_sources(problem: Problem) -> tuple[str, ...]:
    """What ``problem`` gives the predictor for free, one phrase each."""
    out = []
    if isinstance(problem, Evolvable):
        out.append(f"design encoding ({problem.features([problem.random_point(random.Random(0))]).shape[1]} features)")
    describe = getattr(problem, "free_description", None)
    if callable(describe):
        out.append(str(describe()))
    elif isinstance(problem, Predictable):
        out.append("the problem's predictor features and label-free prior")
    cheap = [o.name for o in problem.objectives if o.cost == "cheap"]
    if cheap:
        out.append(f"cheap objectives known for every candidate: {', '.join(cheap)}")
    return tuple(out)


def free_pool(problem: Any) -> list[Any]:
    """The problem's designs with free predictor features (NB201: the shipped proxy table's cells), or []."""
    free = getattr(problem, "free_designs", None)
    return list(free() or []) if callable(free) else []


_POINT_IDS: weakref.WeakKeyDictionary[Any, dict[Any, str]] = weakref.WeakKeyDictionary()


def point_ids(problem: Any, points: Sequence[Any]) -> list[str]:
    """``problem.point_id`` of each point, remembered per problem object.

    A round asks for the ids of the whole free pool (NB201: 15,625 cells) several times (the
    allocation, each niche's candidates, the predictor's cache); a point's id never changes, so
    each is computed once per process. Unhashable points, or a problem that cannot be weakly
    referenced, are simply not remembered.
    """
    try:
        memo = _POINT_IDS.setdefault(problem, {})
        out = []
        for p in points:
            pid = memo.get(p)
            if pid is None:
                pid = memo[p] = problem.point_id(p)
            out.append(pid)
        return out
    except TypeError:
        return [problem.point_id(p) for p in points]


MISSING = -10.0
"""What a missing free feature reads as for the extra-trees learner (robust z is clipped to +-5: a split sets it apart)."""


class _Filled:
    """A learner fitted on rows whose missing free features read :data:`MISSING`; predicts the same way."""

    def __init__(self, model: TreeSurrogate) -> None:
        self.model = model

    def samples(self, features: np.ndarray) -> np.ndarray:
        return self.model.samples(np.nan_to_num(features, nan=MISSING))


class InformedPredictor:
    """The expensive first objective of ``problem`` predicted from its free features, ``paid`` and ``evidence``.

    Args:
        problem: an :class:`search.problem.Evolvable` problem.
        paid: this study's paid evaluations (only successful ones with the objective count).
        seed: seed of the learner.
        evidence: earlier studies' evaluations (already checked to match this problem).
        n_bags: models (= posterior samples) of the boosted learner.
        params: LightGBM settings of the boosted learner (default :data:`ENGINE_LGBM`).
    """

    def __init__(
        self,
        problem: Any,
        paid: Sequence[Evaluation],
        *,
        seed: int,
        evidence: Sequence[Evidence] = (),
        n_bags: int = 8,
        params: dict[str, float | int | str] | None = None,
    ) -> None:
        started = time.perf_counter()
        self.problem = problem
        self.first = problem.front_objectives[0]
        self.bounds = problem.objectives[0].bounds
        self.predictable = isinstance(problem, Predictable)
        self.params = params or ENGINE_LGBM
        paid = self._usable(paid)
        points = [e.point for e in paid]
        labels = [float(e.values[self.first]) for e in paid]
        self._stack: list[BoostedSurrogate | _Filled] = []
        self._known: dict[str, float] = {}
        """Values an earlier study measured that hold here unchanged (a shared objective), by point id (:meth:`_known_key`)."""
        self._known_part: str | None = None
        """The part of a composed problem whose point alone decides a known value (an earlier study of that part), or None."""
        seen = {e.point_id for e in paid}
        transferred = [self._take(ev, points, labels, seen, seed) for ev in evidence if self._usable(ev.evaluations)]
        self.transferred_points: tuple[Any, ...] = tuple({e.point: None for ev in evidence for e in ev.evaluations})
        """The designs earlier studies evaluated (candidates worth ranking: their values are known there)."""
        self.information = Information(free_sources(problem), len(paid), tuple(t for t in transferred if t))
        self.labels = len(labels)
        self._model: BoostedSurrogate | _Filled | None = None
        self._column: dict[str, int] = {}
        """Column of each point id already predicted in :attr:`_predicted` (a model's predictions never change)."""
        self._predicted: np.ndarray | None = None
        if len(labels) >= MIN_LABELS:
            x = self.features(points)
            self._model = self._learner(x, np.array(labels), seed=seed, n_bags=n_bags, prior=self._prior_col(x))
        self.seconds = time.perf_counter() - started
        """Wall time spent fitting and predicting so far (a round logs it: the engine's cost of its predictor)."""

    def _usable(self, evaluations: Sequence[Evaluation]) -> list[Evaluation]:
        """The evaluations with a finite value of the predicted objective."""
        return [e for e in evaluations if self.first in e.values and np.isfinite(e.values[self.first])]

    def _take(self, ev: Evidence, points: list[Any], labels: list[float], seen: set[str], seed: int) -> str:
        """Use one earlier study: its values as labels where the objective carries over (extends ``points`` and
        ``labels``), else a model of them as a feature; returns how, for :class:`Information` ("" for too few)."""
        rows = self._usable(ev.evaluations)
        if self.first in ev.shared:
            part = getattr(ev, "part", None)
            if part is not None:  # a part's value holds for every joint design with that part's point
                self._known_part = part
            self._known.update({self._known_key(e.point, e.point_id): float(e.values[self.first]) for e in rows})
            fresh = [e for e in rows if e.point_id not in seen]
            seen.update(e.point_id for e in fresh)
            points += [e.point for e in fresh]
            labels += [float(e.values[self.first]) for e in fresh]
            where = f" of part {part}" if part is not None else ""
            return f"{ev.source}: {len(fresh)} evaluations of {self.first}{where} as labels (the objective carries over)"
        if len(rows) < MIN_LABELS:
            return ""
        base = self._base_features([e.point for e in rows])
        y = np.array([e.values[self.first] for e in rows])
        self._stack.append(
            self._learner(base, y, seed=seed + 7 * (len(self._stack) + 1), n_bags=1, prior=self._prior_col(base), stack=True)
        )
        return f"{ev.source}: a model of its {len(rows)} evaluations of {self.first} as a feature (another setting)"

    # ------------------------------------------------------------ features

    def _base_features(self, points: Sequence[Any]) -> np.ndarray:
        enc = self.problem.features(list(points))
        if not self.predictable:
            return np.asarray(enc, dtype=float)
        return np.hstack([enc, self.problem.free_features(list(points))])

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """The predictor's feature rows: encoding, free columns (the prior last), then one column per transferred model."""
        base = self._base_features(points)
        if not self._stack:
            return base
        stacked = [m.samples(base).mean(axis=0).reshape(-1, 1) for m in self._stack]
        return np.hstack([base, *stacked])

    def _prior_col(self, x: np.ndarray) -> int | None:
        # the last column is the best label-free guess: a transferred model when there is one, else the problem's prior
        return x.shape[1] - 1 if (self.predictable or self._stack) else None

    def _learner(
        self, x: np.ndarray, y: np.ndarray, *, seed: int, n_bags: int, prior: int | None, stack: bool = False
    ) -> BoostedSurrogate | _Filled:
        # a transferred model stays the boosted correction of the prior (measured so; issue 29)
        if prior is None or (len(y) >= TREES_FROM and not stack):
            return _Filled(TreeSurrogate(np.nan_to_num(x, nan=MISSING), y, bounds=self.bounds, seed=seed))
        return BoostedSurrogate(x, y, bounds=self.bounds, seed=seed, n_bags=n_bags, prior_column=prior, params=self.params)

    # ------------------------------------------------------------ predictions

    @property
    def fitted(self) -> bool:
        """Whether a model was fitted (enough labels): :meth:`point_samples` works."""
        return self._model is not None

    @property
    def ranks(self) -> bool:
        """Whether :meth:`score` ranks designs at all (a model, a transferred model or a free prior)."""
        return self.fitted or bool(self._stack) or self.predictable

    def point_samples(self, points: Sequence[Any]) -> np.ndarray:
        """(S, K) posterior samples of the objective for K points (needs :attr:`fitted`)."""
        if self._model is None:
            raise ValueError(f"the predictor has {self.labels} labels (< {MIN_LABELS}): no model to sample")
        # a round asks for the same designs more than once (a niche's free designs, then its candidates): each is predicted once
        ids = point_ids(self.problem, points)
        fresh = list({pid: p for pid, p in zip(ids, points, strict=True) if pid not in self._column}.items())
        if fresh:
            started = time.perf_counter()
            new = self._model.samples(self.features([p for _, p in fresh]))
            at = 0 if self._predicted is None else self._predicted.shape[1]
            self._predicted = new if self._predicted is None else np.hstack([self._predicted, new])
            self._column.update({pid: at + k for k, (pid, _) in enumerate(fresh)})
            self.seconds += time.perf_counter() - started
        if not ids or self._predicted is None:
            return self._model.samples(self.features([]))
        # the cached columns, copied as they are: the same floats as predicting the points again
        return self._with_known(points, ids, self._predicted[:, [self._column[pid] for pid in ids]])

    def _known_key(self, point: Any, point_id: str) -> str:
        """Under what a known value is kept: the point's id, or its part's point id when an earlier study was of that part."""
        if self._known_part is None:
            return point_id
        return str(self.problem.part(self._known_part).problem.point_id(self.problem.subpoint(point, self._known_part)))

    def _with_known(self, points: Sequence[Any], ids: Sequence[str], samples: np.ndarray) -> np.ndarray:
        # a value an earlier study measured under the same conditions is known, not predicted
        if not self._known:
            return samples
        keys = [self._known_key(p, pid) for p, pid in zip(points, ids, strict=True)]
        cols = [k for k, key in enumerate(keys) if key in self._known]
        if cols:
            samples = samples.copy()
            samples[:, cols] = [self._known[keys[k]] for k in cols]
        return samples

    def samples(self, features: np.ndarray) -> np.ndarray:
        """(S, K) samples for feature rows made by :meth:`features` (:class:`search.surrogate.SurrogateModel`)."""
        if self._model is None:
            raise ValueError(f"the predictor has {self.labels} labels (< {MIN_LABELS}): no model to sample")
        return self._model.samples(features)

    def score(self, points: Sequence[Any]) -> np.ndarray:
        """(K,) a ranking score (higher is better; -inf where nothing is known): the model's mean, else the prior."""
        if not points:
            return np.zeros(0)
        if self._model is not None:
            return self.point_samples(points).mean(axis=0)
        x = self.features(points)
        col = self._prior_col(x)
        if col is None:
            return np.full(len(points), -np.inf)
        return np.where(np.isfinite(x[:, col]), x[:, col], -np.inf)
