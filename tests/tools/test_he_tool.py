"""he.gcn: bad arguments are typed errors naming the fix; a run's numbers are consistent with the structure."""

from __future__ import annotations

import pytest

from coevo.sim.he.run import structural_depth
from coevo.tools import REGISTRY, ToolArgumentError, call_tool

FAST = {"dataset": "digits-grid4", "hidden": [1], "epochs": 2, "teacher_epochs": 2, "encrypted_samples": 0}


def test_bad_arguments_are_typed_errors() -> None:
    tool = REGISTRY.get("he.gcn")
    for bad in (1.5, -0.1):
        with pytest.raises(ToolArgumentError, match="budget"):
            call_tool(tool, {**FAST, "budget": bad})
    with pytest.raises(ToolArgumentError, match="both poly_modulus_degree and coeff_mod_bit_sizes"):
        call_tool(tool, {**FAST, "poly_modulus_degree": 8192})
    # budget 1 with one block: both positions kept on every path, depth 1 + 2 * 2 = 5; a 2-level chain cannot hold it
    with pytest.raises(ToolArgumentError, match="raise the length of coeff_mod_bit_sizes to 7"):
        call_tool(tool, {**FAST, "budget": 1.0, "poly_modulus_degree": 8192, "coeff_mod_bit_sizes": [35, 28, 28, 35]})
    # budget 0.5: depth 3; 4096 holds 109 bits, the chain 35 + 3 * 28 + 35 = 154 does not fit
    with pytest.raises(ToolArgumentError, match="raise poly_modulus_degree to 8192"):
        call_tool(tool, {**FAST, "budget": 0.5, "poly_modulus_degree": 4096, "coeff_mod_bit_sizes": [35, 28, 28, 28, 35]})


def test_plaintext_run_matches_the_structure() -> None:
    half = call_tool(REGISTRY.get("he.gcn"), {**FAST, "budget": 0.5}).value
    assert half["kept_per_block"] == [1]  # round(0.5 * 2) positions per node
    assert half["multiplicative_depth"] == structural_depth([1]) == 3
    assert half["encrypted_accuracy"] is None and half["encrypted_latency_s"] is None
    base = call_tool(REGISTRY.get("he.gcn"), {**FAST, "budget": 1.0}).value
    assert base["multiplicative_depth"] == 5 and base["kept_per_block"] == [2]
    assert half["op_counts"]["mul"] < base["op_counts"]["mul"]


def test_encrypted_run_agrees_with_plaintext() -> None:
    out = call_tool(REGISTRY.get("he.gcn"), {**FAST, "budget": 0.5, "encrypted_samples": 6}).value
    assert out["encrypted_agreement"] == 100.0
    assert out["levels_used"] == out["multiplicative_depth"] == 3
    assert out["poly_modulus_degree"] == 8192 and out["encrypted_latency_s"] > 0


def test_a_handful_of_encrypted_images_gets_a_sample_warning_with_its_interval() -> None:
    from coevo.tools.he import _sample_warning

    # 4 of 4 right: Wilson 95 % interval, z^2 = 3.8416: centre (1 + 0.4802) / 1.9604 = 0.7551,
    # half 1.96 * sqrt(3.8416 / 64) / 1.9604 = 0.2450 -> 51-100 %
    (line,) = _sample_warning(4, 100.0)
    assert "on 4 image(s) only: 95 % interval 51-100 %" in line
    assert _sample_warning(270, 97.0) == [] and _sample_warning(4, None) == []
