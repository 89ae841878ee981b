"""Every ``--json`` output is strict JSON: no NaN or Infinity token a strict parser would reject."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from coevo.agent.json_output import print_object
from coevo.search.runner import SearchResult
from coevo.search.strict_json import strict_dumps


def _strict_loads(text: str) -> Any:
    """``json.loads`` that fails on NaN, Infinity and -Infinity, as jq or JavaScript's JSON.parse do."""

    def refuse(token: str) -> None:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_floats_become_null_with_a_note_and_full_precision_stays() -> None:
    data = _strict_loads(strict_dumps({"hv_ratio": float("nan"), "igd": float("-inf"), "x": 1 / 3, "ys": [1.0, float("inf")]}))
    assert data["hv_ratio"] is None and "NaN" in data["hv_ratio_note"]
    assert data["igd"] is None and "-infinite" in data["igd_note"]
    assert data["x"] == 1 / 3  # records a script compares with stored values keep every digit
    assert data["ys"] == [1.0, None] and "null entries" in data["ys_note"]
    with pytest.raises(ValueError, match="NaN"):
        _strict_loads(json.dumps({"x": float("nan")}))  # the premise: Python's default output is not strict


def test_a_search_result_with_undefined_metrics_is_strict_json() -> None:
    result = SearchResult(
        study="s",
        storage="sqlite:///x",
        problem={"problem": "nb201"},
        proposer="random",
        seed=0,
        budget=2,
        evaluations=2,
        expensive_queries=2,
        trials=2,
        wall_s=0.5,
        hv_ratio=float("nan"),
        igd=None,
        front_recall=None,
        front=[{"point_id": "1", "accuracy": float("nan"), "latency_ms": 1.25}],
    )
    data = _strict_loads(result.to_json())
    assert data["hv_ratio"] is None and data["hv_ratio_note"].startswith("null:")
    assert data["front"][0]["accuracy"] is None and data["front"][0]["latency_ms"] == 1.25


def test_a_json_callers_object_is_strict() -> None:
    stream = io.StringIO()
    print_object({"error": "x", "exit_code": 2, "value": float("inf")}, stream)
    data = _strict_loads(stream.getvalue())
    assert data["value"] is None and data["exit_code"] == 2 and data["value_note"].startswith("null:")
