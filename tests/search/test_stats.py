from __future__ import annotations

import math

import pytest

from coevo.search.stats import accuracy_noise, effect_verdict, excludes_zero, format_interval, paired_log_ratio, t_interval, verdict


def test_t_interval_matches_the_textbook_values() -> None:
    # two values 1 and 3: mean 2, sd sqrt(2), t(0.975, 1) = 12.7062
    mean, half = t_interval([1.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(12.7062 * math.sqrt(2) / math.sqrt(2), rel=1e-4)
    # five values: t(0.975, 4) = 2.7764
    mean, half = t_interval([0.0, 1.0, 2.0, 3.0, 4.0])
    assert mean == 2.0 and half == pytest.approx(2.7764 * math.sqrt(2.5) / math.sqrt(5), rel=1e-4)


def test_format_and_sign() -> None:
    assert format_interval([]) == "n/a" and format_interval([0.5]) == "+0.5000"
    assert format_interval([-1.0, -3.0], digits=1) == "-2.0 ± 12.7"
    assert excludes_zero([1.0, 1.1, 0.9, 1.05, 0.95]) and not excludes_zero([1.0, -1.0, 0.5]) and not excludes_zero([2.0])
    with pytest.raises(ValueError):
        t_interval([])


# ---- verdict lines (expected intervals worked out by hand: t(0.975, 4) = 2.776, t(0.975, 2) = 4.303)


def test_a_verdict_says_better_with_its_interval_when_the_interval_clears_zero() -> None:
    # mean 1.04, sd 0.1140, half-width 2.776 * 0.1140 / sqrt(5) = 0.1416
    line = verdict("a vs b", [1.0, 1.2, 0.9, 1.1, 1.0], unit="points")
    assert line == "a vs b: +1.04 points [+0.90, +1.18] (95 % t interval, 5 pairs): better"


def test_a_verdict_turns_the_word_for_a_lower_is_better_measure_and_flags_a_small_sample() -> None:
    # perplexity differences: mean +0.5 over 3 seeds, sd 0.1, half 4.303 * 0.1 / sqrt(3) = 0.2484
    line = verdict("m vs rtn", [0.4, 0.5, 0.6], unit="perplexity", higher_is_better=False, unit_of_pairing="seeds")
    assert line.startswith("m vs rtn: +0.50 perplexity [+0.25, +0.75] (95 % t interval, 3 seeds): worse")
    assert line.endswith("warning: small sample (3 seeds)")


def test_a_ratio_verdict_is_judged_against_one_and_noise_is_named() -> None:
    # ratios 2, 2, 2.2: mean 2.0667, sd 0.1155, half 4.303 * 0.1155 / sqrt(3) = 0.2869 -> [1.78, 2.35]
    faster = verdict("x vs y", [2.0, 2.0, 2.2], unit="x", null=1.0, unit_of_pairing="rounds")
    assert faster.startswith("x vs y: 2.07 x [1.78, 2.35] (95 % t interval, 3 rounds): better")
    # ratios around 1 with a wide spread: within noise, and the spread is more than twice the effect
    noisy = verdict("x vs y", [0.5, 1.6, 1.0, 0.9, 1.1], unit="x", null=1.0, unit_of_pairing="rounds")
    assert "within noise" in noisy and "wide spread" in noisy and "small sample" not in noisy


def test_a_single_pair_has_no_interval_and_says_so() -> None:
    assert verdict("a vs b", [-0.25], unit="points", unit_of_pairing="fault maps") == (
        "a vs b: -0.25 points (1 fault map, no interval): not known whether this exceeds the noise"
    )
    with pytest.raises(ValueError):
        verdict("a vs b", [], unit="points")


# ---- one run against its own baseline: effect_verdict (the tools' ``verdict`` field)


def test_the_accuracy_noise_is_two_standard_errors_and_never_below_one_example() -> None:
    # p = q = 0.9 on 400: 200 * sqrt(2 * 0.09 / 400) = 4.243 points; at 100 % there is no spread: one example, 0.25 points
    assert accuracy_noise(90.0, 90.0, 400) == pytest.approx(200 * math.sqrt(0.18 / 400))
    assert accuracy_noise(100.0, 100.0, 400) == pytest.approx(0.25)
    with pytest.raises(ValueError):
        accuracy_noise(90.0, 90.0, 0)


def test_an_accuracy_verdict_names_the_sign_only_beyond_the_noise() -> None:
    n = 500  # at ~97 % the noise is about 2.2 points
    drop = effect_verdict("m vs base", 90.0, 97.0, metric="accuracy", n=n)
    gain = effect_verdict("m vs base", 97.0, 90.0, metric="accuracy", n=n)
    tie = effect_verdict("m vs base", 96.4, 97.0, metric="accuracy", n=n)
    assert drop.startswith("verdict: m vs base: -7.00 points") and drop.endswith("negative: worse than the baseline beyond the noise")
    assert gain.startswith("verdict: m vs base: +7.00 points") and gain.endswith("positive: better than the baseline beyond the noise")
    assert tie.endswith("within noise, no effect shown") and len({drop, gain, tie}) == 3
    with pytest.raises(ValueError, match="needs n"):
        effect_verdict("m vs base", 90.0, 97.0, metric="accuracy")


def test_a_perplexity_verdict_turns_the_sign_lower_is_better_and_judges_against_the_paired_interval() -> None:
    half = 0.01  # 95 % half-width of the per-sequence log-ratio: 1.005 % of perplexity
    worse = effect_verdict("p vs dense", 12.6, 12.0, metric="perplexity", n=200, ln_half=half)  # +5 %
    better = effect_verdict("p vs dense", 11.4, 12.0, metric="perplexity", n=200, ln_half=half)  # -5 %
    inside = effect_verdict("p vs dense", 12.06, 12.0, metric="perplexity", n=200, ln_half=half)  # +0.5 %: ln 1.005 < 0.01
    outside = effect_verdict("p vs dense", 12.0 * math.exp(0.011), 12.0, metric="perplexity", n=200, ln_half=half)
    assert "+5.00 % perplexity" in worse and worse.endswith("negative: worse than the baseline beyond the noise")
    assert "-5.00 % perplexity" in better and better.endswith("positive: better than the baseline beyond the noise")
    assert "noise 1.01 %" in inside and "over 200 sequences" in inside and inside.endswith("within noise, no effect shown")
    assert outside.endswith("negative: worse than the baseline beyond the noise")
    # a paired interval narrower than the evaluation's resolution: the floor decides
    assert effect_verdict("p vs dense", 12.0 * math.exp(5e-5), 12.0, metric="perplexity", n=200, ln_half=1e-7).endswith(
        "within noise, no effect shown"
    )
    one = effect_verdict("p vs dense", 12.6, 12.0, metric="perplexity", n=1, ln_half=math.nan)
    assert one.endswith("not known whether this exceeds the noise")
    with pytest.raises(ValueError, match="needs ln_half"):
        effect_verdict("p vs dense", 12.6, 12.0, metric="perplexity")
    with pytest.raises(ValueError, match="accuracy or perplexity"):
        effect_verdict("x", 1.0, 1.0, metric="latency")


def test_the_paired_log_ratio_is_the_t_interval_of_the_per_sequence_differences() -> None:
    # differences 0.5, 0.5, 1.0: mean 2/3, sd 0.2887, t(0.975, 2) = 4.3027, half = 4.3027 * 0.2887 / sqrt 3 = 0.7172
    mean, half, n = paired_log_ratio([1.0, 2.0, 3.0], [0.5, 1.5, 2.0])
    assert (mean, n) == (pytest.approx(2 / 3), 3) and half == pytest.approx(0.7172, abs=1e-4)
    with pytest.raises(ValueError, match="equally long"):
        paired_log_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="equally long"):
        paired_log_ratio([], [])
