"""freeze.train: the issue's command (cnn-mnist maps to cnn-mnist5k), the comparison it returns, and its bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.tools import REGISTRY, ToolArgumentError, call_tool

TOOL = REGISTRY.get("freeze.train")


def test_cache_run_with_baselines_is_consistent() -> None:
    value = call_tool(
        TOOL, {"model": "cnn-digits", "epochs": 3, "schedule": "fixed", "freeze_at": [1, 2, None], "cache": "jpeg", "versions": 1}
    ).value
    assert value["method"] == "cache" and value["freeze_epochs"] == [1, 2, None]
    assert set(value["baselines"]) == {"full", "naive"}
    full, naive = value["baselines"]["full"], value["baselines"]["naive"]
    # the cache skips the frozen prefix's forward; naive still runs it; full trains everything
    assert full["train_gmac"] > naive["train_gmac"] and full["cache_bytes"] == naive["cache_bytes"] == 0
    assert value["macs_vs_full"] == pytest.approx(value["train_gmac"] / full["train_gmac"], abs=1e-3)
    assert [s["codec"] for s in value["stages"]] == ["jpeg-q90", "jpeg-q75"]  # compression rises as blocks freeze
    assert value["cache_bytes"] == max(s["bytes"] for s in value["stages"]) and value["cache_bytes"] > 0
    assert all(len(s["channels_augmented"]) == round(0.25 * s["shape"][0]) for s in value["stages"])
    assert 0 <= value["test_accuracy"] <= 100 and value["cache_rebuilt"] == 0


@pytest.mark.slow
def test_the_issue_command_runs_on_mnist5k() -> None:
    result = call_tool(
        TOOL, {"model": "cnn-mnist", "schedule": "auto", "cache": "jpeg", "augment": "similarity-aware", "epochs": 1, "baselines": False}
    )
    assert result.value["model"] == "cnn-mnist5k"
    assert any("cnn-mnist5k" in m and "offline" in m for m in result.messages)
    assert result.value["freeze_epochs"] == [None, None, None]  # one epoch: nothing may freeze before training ends


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"schedule": "fixed"}, "needs freeze_at"),
        ({"schedule": "fixed", "freeze_at": [2, 1, None]}, "must rise"),
        ({"bits": [8, 5, 4]}, "5 bits"),
        ({"cache": "png"}, "cache"),
        ({"model": "lm-pydoc"}, "model"),
        ({"share": 2.0}, "share"),
    ],
)
def test_bad_input_is_one_clear_line(args: dict, match: str) -> None:
    with pytest.raises(ToolArgumentError, match=match):
        call_tool(TOOL, {"model": "cnn-digits", "epochs": 2, "baselines": False, **args})


def test_an_unwritable_cache_dir_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ToolArgumentError, match="not writable"):
        call_tool(TOOL, {"model": "cnn-digits", "epochs": 1, "baselines": False, "cache_dir": str(tmp_path / "f" / "cache")})
