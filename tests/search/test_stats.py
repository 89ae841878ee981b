from __future__ import annotations

import math

import pytest

from coevo.search.stats import excludes_zero, format_interval, t_interval


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
