from __future__ import annotations

import numpy as np
import pytest

from coevo.search.predictor import BoostedSurrogate, out_of_fold_rho, percentile_ranks, robust_z, spearman, zero_shot


def test_robust_z_and_percentiles_by_hand() -> None:
    ref = np.array([[1.0, 10.0], [2.0, 10.0], [3.0, 10.0], [4.0, 10.0], [5.0, 10.0]])
    # column 0: median 3, IQR 4 - 2 = 2; column 1 has no spread: divided by 1, not by 0
    z = robust_z(np.array([[3.0, 12.0], [7.0, 9.0], [1e9, -1e9]]), ref)
    assert z.tolist() == [[0.0, 2.0], [2.0, -1.0], [5.0, -5.0]]  # clipped at +-5
    assert percentile_ranks(np.array([[0.0], [3.0], [9.0]]), ref[:, :1]).ravel().tolist() == [0.0, 50.0, 100.0]


def test_zero_shot_scales_and_bands() -> None:
    rng = np.random.default_rng(0)
    ref = rng.normal(size=(50, 3))
    x = np.array([[3.0, 3.0, 3.0], [3.0, 3.5, 4.0], [0.0, 0.0, 0.0]])
    z = zero_shot(x, ref)
    # the z scale keeps the order above the reference's best; percentiles tie both rows at 100
    assert z[1] > z[0] > z[2]
    assert zero_shot(x, ref, scale="rank")[:2].tolist() == [100.0, 100.0]
    with pytest.raises(ValueError, match="cheap objective"):
        zero_shot(x, ref, bands=2)
    cheap, ref_cheap = np.array([0.0, 0.0, 1.0]), np.r_[np.zeros(25), np.ones(25)]
    banded = zero_shot(x, ref, cheap=cheap, reference_cheap=ref_cheap, bands=2, band_weight=0.0)
    assert banded == pytest.approx(z)  # weight 0: the global scale alone


def _toy(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A maximised objective in 0..100 that depends on two of four features; the last column is a noisy prior of it."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(n, 3))
    y = 60 + 30 * x[:, 0] + 8 * np.sin(6 * x[:, 1])
    prior = y + rng.normal(scale=4.0, size=n)
    return np.hstack([x, prior[:, None]]), y


def test_boosted_surrogate_learns_and_samples_within_bounds() -> None:
    x, y = _toy(300, 0)
    xt, yt = _toy(300, 1)
    model = BoostedSurrogate(x, y, bounds=(0.0, 100.0), seed=0, n_bags=8)
    samples = model.samples(xt)
    assert samples.shape == (8, 300) and (samples < 100.5).all()
    assert spearman(model.predict(xt), yt) > 0.9
    assert model.samples(xt[:0]).shape == (8, 0)
    # the same seed, the same model
    assert np.array_equal(BoostedSurrogate(x, y, bounds=(0.0, 100.0), seed=0, n_bags=8).samples(xt), samples)


def test_the_prior_column_carries_a_fit_on_few_labels() -> None:
    x, y = _toy(10, 2)
    xt, yt = _toy(500, 3)
    with_prior = BoostedSurrogate(x, y, bounds=(0.0, 100.0), seed=0, prior_column=-1).predict(xt)
    without = BoostedSurrogate(x[:, :-1], y, bounds=(0.0, 100.0), seed=0).predict(xt[:, :-1])
    # 10 labels: too few for trees alone, enough to place a line on the prior
    assert spearman(with_prior, yt) > spearman(without, yt) + 0.05
    assert spearman(with_prior, yt) >= spearman(xt[:, -1], yt) - 0.05


def test_out_of_fold_rho_tells_signal_from_noise() -> None:
    x, y = _toy(80, 4)
    assert out_of_fold_rho(x, y, bounds=(0.0, 100.0), seed=0, prior_column=-1) > 0.8
    noise = np.random.default_rng(5).uniform(60, 90, size=80)
    assert abs(out_of_fold_rho(x, noise, bounds=(0.0, 100.0), seed=0)) < 0.35
    assert np.isnan(out_of_fold_rho(x[:4], y[:4], bounds=(0.0, 100.0), seed=0))


def test_spearman_edge_cases() -> None:
    assert np.isnan(spearman([1, 2], [1, 2])) and np.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
