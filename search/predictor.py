"""Predictors of an expensive objective from zero-cost proxies: label-free and learned.

Two kinds, both ranking designs by a maximised objective (NB201: accuracy):

* :func:`zero_shot`: no label at all. Each proxy is put on a common scale against a fixed
  reference sample of designs (robust z-score, or percentile for the classic rank ensemble)
  and the estimate is the mean over a fixed proxy set. ``bands`` also scales within bands of
  the cheap objective (latency), to take out the size trend at the fast end.
* :class:`BoostedSurrogate`: LightGBM gradient-boosted trees fitted on the designs paid for
  (their true values) over the proxies, op counts and FLOPs, as a correction of a line on
  the zero-shot prior. A bag of models on bootstrap resamples gives posterior samples, so the
  co-evolution engine ranks candidates by expected HV improvement with it as with
  :class:`search.surrogate.TreeSurrogate`.

:func:`spearman` and :func:`out_of_fold_rho` measure how far a predictor can be trusted.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np

from coevo.search.surrogate import TopTransform

LGBM_PARAMS: dict[str, float | int | str] = {
    "objective": "regression",
    "n_estimators": 300,
    "learning_rate": 0.05,
    "num_leaves": 8,
    "min_child_samples": 3,
    "subsample": 0.8,
    "subsample_freq": 1,
    "colsample_bytree": 0.8,
    "reg_lambda": 1.0,
    "verbose": -1,
    "n_jobs": 1,
}
"""Small trees, strong shrinkage: the fits see 8 to a few hundred labels."""


def percentile_ranks(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Percentile (0..100) of each value of ``values`` (n, m) within column ``j`` of ``reference`` (r, m); mid-rank for ties."""
    values = np.atleast_2d(np.asarray(values, dtype=float))
    reference = np.atleast_2d(np.asarray(reference, dtype=float))
    out = np.empty_like(values)
    for j in range(values.shape[1]):
        ref = np.sort(reference[:, j])
        lo = np.searchsorted(ref, values[:, j], side="left")
        hi = np.searchsorted(ref, values[:, j], side="right")
        out[:, j] = 100.0 * (lo + hi) / (2.0 * len(ref))
    return out


Z_CLIP = 5.0
"""Robust z-scores are clipped to +-this: degenerate designs (a proxy at -1e9) must not swamp an average."""


def robust_z(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Robust z-score of ``values`` (n, m) per column against ``reference`` (r, m): (x - median) / IQR, clipped to +-:data:`Z_CLIP`."""
    values = np.atleast_2d(np.asarray(values, dtype=float))
    reference = np.atleast_2d(np.asarray(reference, dtype=float))
    median = np.median(reference, axis=0)
    q75, q25 = np.percentile(reference, [75, 25], axis=0)
    spread = np.where(q75 - q25 > 0, q75 - q25, 1.0)
    return np.clip((values - median) / spread, -Z_CLIP, Z_CLIP)


def zero_shot(
    proxies: np.ndarray,
    reference: np.ndarray,
    *,
    scale: Literal["z", "rank"] = "z",
    cheap: np.ndarray | None = None,
    reference_cheap: np.ndarray | None = None,
    bands: int = 0,
    band_weight: float = 0.5,
) -> np.ndarray:
    """Label-free estimate (higher is better) of each row of ``proxies`` (n, m): the mean of the proxies on a common scale.

    Args:
        proxies: the chosen proxies of the designs to score (columns oriented so higher is better).
        reference: the same proxies of a fixed reference sample (r, m): the scale.
        scale: ``z`` (mean :func:`robust_z`) or ``rank`` (mean percentile within the reference,
            the classic rank ensemble, which ties every design above the reference's best).
        cheap, reference_cheap: the cheap objective (e.g. latency) of the designs and of the
            reference sample, for band-wise ranking.
        bands: 0 for one global scale; else the number of equal-count bands of the cheap
            objective (over the reference) within which designs are also scaled, to take out
            the size trend inside a band.
        band_weight: share of the within-band score in the estimate (the rest is the global one).
    """
    norm = robust_z if scale == "z" else percentile_ranks
    glob = norm(proxies, reference).mean(axis=1)
    if bands <= 0:
        return glob
    if cheap is None or reference_cheap is None:
        raise ValueError("band-wise ranking needs the cheap objective of the designs and of the reference sample")
    edges = np.quantile(reference_cheap, np.linspace(0, 1, bands + 1)[1:-1])
    where, ref_where = np.searchsorted(edges, cheap, side="right"), np.searchsorted(edges, reference_cheap, side="right")
    within = np.empty(len(proxies))
    for b in np.unique(where):
        rows, ref_rows = where == b, ref_where == b
        band_ref = reference[ref_rows] if ref_rows.sum() >= 4 else reference
        within[rows] = norm(proxies[rows], band_ref).mean(axis=1)
    return (1.0 - band_weight) * glob + band_weight * within


def spearman(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Spearman's rho of two samples; nan when fewer than 3 pairs or a sample is constant."""
    from scipy import stats  # lazy: scipy.stats costs ~1.5 s of every coevo start-up

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(stats.spearmanr(a, b).statistic)


class BoostedSurrogate:
    """A bag of LightGBM regressors of one maximised objective (a :class:`search.surrogate.SurrogateModel`).

    Args:
        features: (n, d) feature rows of the designs paid for.
        values: (n,) their true values.
        bounds: (lower, upper) bounds of the objective; with an upper bound the fit uses the
            log-distance to it, as :class:`search.surrogate.TreeSurrogate` does.
        seed: seed of the bootstrap and of the trees.
        n_bags: models in the bag (= posterior samples).
        prior_column: index of a label-free prior among the feature columns (e.g. -1), or None.
            With one, the trees fit the residual of a least-squares line on the prior: with
            10 labels the fit keeps the prior's ranking (rho 0.86 on NB201) instead of
            learning one from scratch (0.80); with 100 the two agree within 0.01.
    """

    def __init__(
        self,
        features: np.ndarray,
        values: np.ndarray,
        *,
        bounds: tuple[float | None, float | None] = (None, None),
        seed: int,
        n_bags: int = 16,
        prior_column: int | None = None,
        params: dict[str, float | int | str] | None = None,
    ) -> None:
        from lightgbm import LGBMRegressor  # imported here: only few-shot and zero-cost searches need it

        self._transform = TopTransform(bounds)
        x = np.asarray(features, dtype=float)
        y = self._transform.forward(np.asarray(values, dtype=float))
        self._prior_column = prior_column
        self._line = np.zeros(2)
        self._level = float(np.mean(y)) if len(y) else 0.0
        if prior_column is not None:
            known = np.isfinite(x[:, prior_column])
            if known.sum() >= 2 and np.ptp(x[known, prior_column]) > 0:
                self._line = np.polyfit(x[known, prior_column], y[known], 1)
                # designs without a free prior (NB201 cells outside the shipped proxy table) start from the line's mean
                self._level = float(np.mean(np.polyval(self._line, x[known, prior_column])))
        y = y - self._base(x)
        rng = np.random.default_rng(seed)
        self._models = []
        for _ in range(n_bags):
            rows = rng.integers(0, len(y), len(y)) if n_bags > 1 else np.arange(len(y))
            model = LGBMRegressor(**(params or LGBM_PARAMS), random_state=int(rng.integers(2**31)))  # type: ignore[arg-type]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "X does not have valid feature names" and friends
                model.fit(x[rows], y[rows])
            self._models.append(model)

    def _base(self, x: np.ndarray) -> np.ndarray:
        if self._prior_column is None:
            return np.zeros(len(x))
        prior = x[:, self._prior_column]
        if not self._line.any():
            return np.full(len(x), self._level)
        return np.where(np.isfinite(prior), np.polyval(self._line, np.nan_to_num(prior)), self._level)

    def samples(self, features: np.ndarray) -> np.ndarray:
        """(S, K) samples of the objective, in its unit, for K feature rows."""
        x = np.asarray(features, dtype=float)
        if len(x) == 0:
            return np.zeros((len(self._models), 0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raw = np.stack([m.predict(x) for m in self._models]) + self._base(x)
        return self._transform.inverse(raw)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Mean prediction per row."""
        return self.samples(features).mean(axis=0)


def out_of_fold_rho(
    features: np.ndarray,
    values: np.ndarray,
    *,
    bounds: tuple[float | None, float | None],
    seed: int,
    folds: int = 5,
    prior_column: int | None = None,
) -> float:
    """Spearman's rho between out-of-fold predictions of a one-model :class:`BoostedSurrogate` and the true values."""
    n = len(values)
    if n < max(folds, 6):
        return float("nan")
    order = np.random.default_rng(seed).permutation(n)
    predicted = np.empty(n)
    for k in range(folds):
        test = order[k::folds]
        train = np.setdiff1d(order, test)
        model = BoostedSurrogate(features[train], values[train], bounds=bounds, seed=seed + k, n_bags=1, prior_column=prior_column)
        predicted[test] = model.predict(features[test])
    return spearman(predicted, values)
