"""prune.activation on lm-pydoc-tiny: measured sparsity, perplexities, bad input as one clear error, the zoo model untouched."""

from __future__ import annotations

import pytest
import torch

from coevo.search.prune.run import zoo_model
from coevo.tools import REGISTRY, ToolArgumentError, call_tool

TOOL = next(t for t in REGISTRY if t.name == "prune.activation")
BASE = {"model": "lm-pydoc-tiny", "calib_tokens": 32}


def test_prunes_to_the_target_and_reports_both_perplexities() -> None:
    zm = zoo_model("lm-pydoc-tiny")
    before = {k: v.clone() for k, v in zm.model.state_dict().items()}
    result = call_tool(TOOL, {**BASE, "sparsity": 0.5, "pattern": "4:8", "score": "wanda"})
    v = result.value
    assert v["verdict"] in result.messages and "vs dense, test perplexity" in v["verdict"]
    assert v["test_sequences"] == len(zm.splits["test"]) and 0 < v["test_ln_half"] < 0.1  # paired over every test sequence
    assert v["sparsity"] == 0.5 and v["layers"] == 12 and v["pattern"] == "4:8" and v["calib_tokens"] == 32
    assert set(v["layer_sparsity"].values()) == {0.5}
    assert v["metric"] == "perplexity" and 1 < v["val_dense"] < v["val_pruned"] and 1 < v["test_dense"] < v["test_pruned"]
    assert v["val_dense"] == pytest.approx(zm.evaluate(zm.model, split="val"))  # the dense model was not pruned in place
    assert all(torch.equal(before[k], t) for k, t in zm.model.state_dict().items())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"sparsity": 1.0}, "less than 1"),
        ({"sparsity": 0}, "greater than 0"),
        ({"pattern": "3:4"}, "pattern"),
        ({"pattern": "2:4", "sparsity": 0.6}, "does not match"),
        ({"model": "no-such-model"}, "no-such-model"),
        ({"score": "taylor"}, "score"),
    ],
)
def test_bad_input_is_one_clear_error(args: dict[str, object], message: str) -> None:
    with pytest.raises(ToolArgumentError, match=message) as exc:
        call_tool(TOOL, {**BASE, **args})
    assert "\n" not in str(exc.value)


def test_a_sparsity_the_pattern_does_not_allow_is_refused_before_the_model_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    # it used to be found after the model loaded: minutes of training first for a model not yet cached
    import coevo.tools.prune as prune_tool

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(prune_tool, "zoo_model", never)
    with pytest.raises(ToolArgumentError, match=r"sparsity 0.3 does not match pattern 2:4, which prunes exactly 0.5"):
        call_tool(TOOL, {**BASE, "pattern": "2:4", "sparsity": 0.3})
