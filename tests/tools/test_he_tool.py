"""he.gcn: bad arguments are typed errors naming the fix; a run's numbers are consistent with the structure."""

from __future__ import annotations

import pytest

from coevo.sim.he.run import structural_depth
from coevo.tools import REGISTRY, ToolArgumentError, call_tool

FAST = {"dataset": "digits-grid4", "hidden": [1], "epochs": 2, "teacher_epochs": 2, "encrypted_samples": 0}


def test_bad_arguments_are_typed_errors() -> None:
    tool = REGISTRY.get("he.gcn")
    with pytest.raises(ToolArgumentError, match="keep_nonlinear"):
        call_tool(tool, {**FAST, "keep_nonlinear": 1.5})
    with pytest.raises(ToolArgumentError, match="both poly_modulus_degree and coeff_mod_bit_sizes"):
        call_tool(tool, {**FAST, "poly_modulus_degree": 8192})
    # keep 0.25 of 16 nodes with a degree-4 ReLU: depth 1 + 2 + 1 = 4; a 2-level chain cannot hold it
    with pytest.raises(ToolArgumentError, match="raise the length of coeff_mod_bit_sizes to 6"):
        call_tool(tool, {**FAST, "poly_modulus_degree": 8192, "coeff_mod_bit_sizes": [35, 28, 28, 35]})
    with pytest.raises(ToolArgumentError, match="raise poly_modulus_degree to 8192"):
        call_tool(tool, {**FAST, "poly_modulus_degree": 4096, "coeff_mod_bit_sizes": [35, 28, 28, 28, 28, 35]})


def test_plaintext_run_matches_the_structure() -> None:
    out = call_tool(REGISTRY.get("he.gcn"), {**FAST, "keep_nonlinear": 0.25, "relu_degree": 8}).value
    assert out["kept_relu_nodes_per_layer"] == [4]  # round(0.25 * 16)
    assert out["multiplicative_depth"] == structural_depth(1, [True], 2, 8) == 1 + 1 + 3
    assert out["encrypted_accuracy"] is None and out["encrypted_latency_s"] is None
    base = call_tool(REGISTRY.get("he.gcn"), {**FAST, "keep_nonlinear": 0.0}).value
    assert base["multiplicative_depth"] == 3 and base["kept_relu_nodes_per_layer"] == [0]
    assert base["op_counts"]["mul"] < out["op_counts"]["mul"]


def test_encrypted_run_agrees_with_plaintext() -> None:
    out = call_tool(REGISTRY.get("he.gcn"), {**FAST, "keep_nonlinear": 0.25, "encrypted_samples": 6}).value
    assert out["encrypted_agreement"] == 100.0
    assert out["levels_used"] == out["multiplicative_depth"] == 4
    assert out["poly_modulus_degree"] == 8192 and out["encrypted_latency_s"] > 0
