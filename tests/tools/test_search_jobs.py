"""search.start runs a search in the background; search.status follows it to the end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coevo.tools import REGISTRY, ToolArgumentError, call_tool, search_jobs
from coevo.tools.search_jobs import log_path, process_state
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
    assert status["process"] == "exited"  # finished means the process wrote its summary too, not only the last trial
    assert '"information"' in str(status["log_tail"])  # the end of the background command's JSON summary (its last fields)


def test_a_search_whose_process_still_runs_is_not_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    study = "bg-study"
    log_path(study).parent.mkdir(parents=True)
    log_path(study).with_suffix(".pid").write_text(f"{os.getpid()}\n")  # a live process: this one
    assert process_state(study) == "running"
    sleeper = subprocess.Popen([sys.executable, "-c", "pass"])
    sleeper.wait()
    log_path(study).with_suffix(".pid").write_text(f"{sleeper.pid}\n")  # a process that has exited and was reaped
    assert process_state(study) == "exited"
    assert process_state("never-started") is None


def test_bad_options_fail_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ToolArgumentError, match=r"dataset: input should be 'cifar10'.*got 'mnist'"):
        call_tool(REGISTRY.get("search.start"), {"options": {"dataset": "mnist"}, "storage": f"sqlite:///{tmp_path / 's.sqlite3'}"})
    assert not Path("runs/jobs").exists()


def test_status_of_a_search_that_has_not_written_its_study_yet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asked in the seconds before a background search opens its study: starting, not "no study"; a failed start says why."""
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 'nothing-yet.sqlite3'}"
    status = REGISTRY.get("search.status")
    log_path("starting").parent.mkdir(parents=True)
    log_path("starting").with_suffix(".pid").write_text(f"{os.getpid()}\n")  # a live process: this one
    log_path("starting").write_text("loading the problem\n")
    result = call_tool(status, {"study": "starting", "storage": storage})
    assert result.value["finished"] is False and result.value["process"] == "running" and result.value["paid"] == 0
    assert "has not written its study yet" in result.messages[0] and result.value["log_tail"] == "loading the problem\n"

    failed = subprocess.Popen([sys.executable, "-c", "import sys; print('bad option'); sys.exit(2)"], stdout=subprocess.PIPE)
    failed.wait()
    monkeypatch.setitem(search_jobs._STARTED, failed.pid, failed)  # as search.start records the processes it starts
    log_path("broken").with_suffix(".pid").write_text(f"{failed.pid}\n")
    log_path("broken").write_text("error: bad option\n")
    with pytest.raises(ToolArgumentError, match=r"'broken' exited \(code 2\) before it wrote its study .* its log ends: error: bad option"):
        call_tool(status, {"study": "broken", "storage": storage})
    with pytest.raises(ToolArgumentError, match="no storage at"):  # a study no search here started: the error as it was
        call_tool(status, {"study": "never-started", "storage": storage})


def test_search_start_names_the_study_as_coevo_search_does_with_an_llm_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With an LLM in the environment, coevo search names the study with the model (the proposer's variant); search.start did not."""
    from coevo.agent.run_config import make_proposer
    from coevo.search.config import ReasonerConfig, SearchConfig
    from coevo.search.runner import study_name_of

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COEVO_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # nothing is asked of it: only named
    monkeypatch.setenv("COEVO_LLM_MODEL", "some-model")
    started: list[list[str]] = []

    class NoProcess:
        pid = 999_999_999

        def __init__(self, command: list[str], **kwargs: object) -> None:
            started.append(command)

    monkeypatch.setattr(search_jobs.subprocess, "Popen", NoProcess)
    value = call_tool(REGISTRY.get("search.start"), {"budget": 5, "storage": f"sqlite:///{tmp_path / 's.sqlite3'}"}).value
    cli = SearchConfig.create(budget=5, reasoner=ReasonerConfig())  # what `coevo search --budget 5` configures
    assert value["study"] == study_name_of(cli.make_problem(), make_proposer(cli), 0) == "nb201-cifar10-fpga-pelnas-some-model-s0"
    assert started and started[0][started[0].index("--study") + 1] == value["study"]
