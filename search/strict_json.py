"""Strict JSON: what ``json.dumps(..., allow_nan=False)`` accepts and every parser reads.

Python's ``json`` writes ``NaN`` and ``Infinity`` by default, which strict parsers (``jq``,
JavaScript's ``JSON.parse``, Go) reject. Every ``--json`` output of coevo goes through
:func:`strict_dumps`: a non-finite float becomes null with a ``<key>_note`` beside it saying why.
Tool results (``coevo tools run --json``) also round floats to :data:`SIGNIFICANT_DIGITS`
significant digits; search and study records keep full precision (a script compares them with
the stored values).
"""

from __future__ import annotations

import json
import math
from typing import Any

SIGNIFICANT_DIGITS = 7
"""Significant digits a float keeps in strict JSON: a float32 measurement's precision, and well above a simulator's."""


def _strict_float(x: float, significant: int | None) -> float | None:
    if math.isnan(x) or math.isinf(x):
        return None
    return x if significant is None else float(f"{x:.{significant}g}")


def _non_finite_note(x: float) -> str:
    if math.isnan(x):
        return "null: the value is undefined here (NaN, e.g. nothing was measured to average)"
    return f"null: the value is {'+' if x > 0 else '-'}infinite (e.g. nothing completed, or a division by zero)"


def strict_json_value(value: Any, significant: int | None = SIGNIFICANT_DIGITS) -> Any:
    """``value`` made strict JSON: a NaN or infinite float becomes null with a ``<key>_note`` beside it saying why,
    floats keep ``significant`` significant digits (None: all of them), tuples become lists; ``json.dumps(...,
    allow_nan=False)`` then accepts it.

    Example:
        >>> strict_json_value({"hv": float("nan"), "x": 1 / 3, "n": 3})
        {'hv': None, 'hv_note': 'null: the value is undefined here (NaN, e.g. nothing was measured to average)', 'x': 0.3333333, 'n': 3}
    """
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return _strict_float(value, significant)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            out[k] = strict_json_value(v, significant)
            if f"{k}_note" in value:
                continue
            if isinstance(v, float) and out[k] is None:
                out[f"{k}_note"] = _non_finite_note(v)
            elif isinstance(v, list | tuple) and any(isinstance(x, float) and not math.isfinite(x) for x in v):
                out[f"{k}_note"] = "null entries: values undefined (NaN) or infinite there"
        return out
    if isinstance(value, list | tuple):
        return [strict_json_value(v, significant) for v in value]
    if hasattr(value, "item") and callable(value.item):  # a numpy scalar
        return strict_json_value(value.item(), significant)
    return value


def strict_dumps(value: Any, *, significant: int | None = None, indent: int | None = None) -> str:
    """``value`` as strict JSON text (:func:`strict_json_value`; values JSON has no form for, a path say, as text).

    Example:
        >>> strict_dumps({"hv_ratio": float("inf"), "budget": 30})
        '{"hv_ratio": null, "hv_ratio_note": "null: the value is +infinite (e.g. nothing completed, or a division by zero)", "budget": 30}'
    """
    return json.dumps(strict_json_value(value, significant), indent=indent, allow_nan=False, default=str)
