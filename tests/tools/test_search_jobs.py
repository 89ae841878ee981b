"""search.start runs a search in the background; search.status follows it to the end."""

from __future__ import annotations

from pathlib import Path

import pytest

from coevo.tools import REGISTRY, ToolArgumentError, call_tool
from tests.helpers import wait_until


def test_background_search_reports_progress_until_finished(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 's.sqlite3'}"
    started = call_tool(
        REGISTRY.get("search.start"), {"proposer": "random", "budget": 8, "options": {"device": "raspi4"}, "storage": storage}
    ).value
    assert started["study"] == "nb201-cifar10-raspi4-random-s0" and Path(started["log"]).exists()

    def finished() -> dict[str, object] | None:
        try:
            status = call_tool(REGISTRY.get("search.status"), {"study": started["study"], "storage": storage}).value
        except ToolArgumentError:
            return None  # the process has not created the study yet
        return status if status["finished"] else None

    status = wait_until(finished, 90, "the background search to finish", every_s=0.3)
    assert status["finished"] and status["evaluations"] == 8 and status["budget"] == 8
    assert 0 < float(status["hv_ratio"]) <= 1  # type: ignore[arg-type]
    assert '"information"' in str(status["log_tail"])  # the end of the background command's JSON summary (its last fields)


def test_bad_options_fail_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ToolArgumentError, match=r"dataset: input should be 'cifar10'.*got 'mnist'"):
        call_tool(REGISTRY.get("search.start"), {"options": {"dataset": "mnist"}, "storage": f"sqlite:///{tmp_path / 's.sqlite3'}"})
    assert not Path("runs/jobs").exists()
