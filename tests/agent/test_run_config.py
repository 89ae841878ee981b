"""One path from flags to objects: every entry point builds one SearchConfig, with one set of defaults and one set of checks."""

from __future__ import annotations

import argparse
import inspect
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna
import pytest

import coevo
from coevo.agent.cli import build_parser, main
from coevo.agent.cli._common import search_config
from coevo.agent.llm_client import LLMSettings
from coevo.agent.reasoners.llm import LLMReasoner
from coevo.agent.run_config import joined_search, make_proposer
from coevo.search.config import ReasonerConfig, SearchConfig
from coevo.search.errors import UserInputError
from coevo.search.nb201 import NB201Problem
from coevo.search.problems import problem_class
from coevo.search.study import paid_count
from coevo.search.workers import WorkerSettings
from coevo.tools import REGISTRY, ToolArgumentError, call_tool
from tests.helpers import coevo_env

ENV = ("COEVO_LLM_BASE_URL", "COEVO_LLM_MODEL", "OPENAI_API_KEY")
FAST = ["--heartbeat", "1", "--grace", "3"]

OLD_OPTIONS: dict[str, Any] = {
    # what a pelnas study stored before the engine had --screen and the LLM reasoner had tools (commit 7f696ac)
    "round_size": 4,
    "init_per_niche": 4,
    "retries": 2,
    "kb_tokens": 600,
    "kb_from": None,
    "withhold": [],
    "reasoner": {"kind": "offline", "guided": True},
}


@pytest.fixture(autouse=True)
def _no_llm_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def _parse(*argv: str) -> Any:
    return build_parser(problem_class("nb201")).parse_args(list(argv))


# ---------------------------------------------------------------- defaults, declared once


def test_the_cli_the_api_and_the_tools_share_the_defaults_and_the_default_proposer_is_pelnas() -> None:
    defaults = SearchConfig()
    assert defaults.proposer == "pelnas" and defaults.problem == "nb201"  # the headline engine, as the issue asks
    # `coevo search` with no flags is the configuration's defaults, with the reasoner the flags leave to it (auto)
    assert search_config(_parse("search")) == defaults.model_copy(update={"reasoner": ReasonerConfig()})
    api = inspect.signature(coevo.optimize).parameters
    assert (api["proposer"].default, api["budget"].default, api["seed"].default) == (defaults.proposer, defaults.budget, defaults.seed)
    tool = REGISTRY.get("search.run").Args()
    assert (tool.problem, tool.proposer, tool.budget, tool.seed) == (defaults.problem, defaults.proposer, defaults.budget, defaults.seed)
    # bench leaves --budget unset (None) so it can tell it from --budgets; unset, it runs the declared default
    assert _parse("bench").budget is None and _parse("bench", "--budget", "7").budget == 7
    worker = _parse("worker", "--study", "s")
    timing = WorkerSettings()
    assert (worker.heartbeat, worker.grace, worker.db_patience) == (timing.heartbeat_s, timing.grace_s, timing.patience_s)


def test_the_llm_timeout_is_one_default_for_every_client() -> None:
    from coevo.agent.chat.options import add_arguments

    chat = argparse.ArgumentParser()
    add_arguments(chat)
    timeouts = {
        "reasoner config": ReasonerConfig().timeout_s,
        "llm client": LLMSettings("http://h/v1", "m").timeout_s,
        "llm reasoner": inspect.signature(LLMReasoner).parameters["timeout_s"].default,
        "chat flag": chat.parse_args([]).llm_timeout,
    }
    assert set(timeouts.values()) == {60.0}, timeouts  # the 60 s, now declared once


def test_the_search_help_names_pelnas_as_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    assert "(default: pelnas)" in " ".join(capsys.readouterr().out.split())


# ---------------------------------------------------------------- bad values fail in one place, named


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["search", "--llm-timeout", "0"], "--llm-timeout must be a positive number of seconds, got 0.0"),
        (["search", "--llm-price=-1,2"], "--llm-price must be two non-negative USD amounts"),
        (["search", "--kb-tokens", "0"], "--kb-tokens must be at least 1, got 0"),
        (
            ["search", "--seed", "-1", "--budget", "-1"],
            "--budget must be a number of evaluations, 0 or more (0: the front the free information predicts), got -1; "
            "--seed must be an integer",
        ),
        (["bench", "--proposers", "pelnas", "--round-size", "0"], "--round-size must be at least 1, got 0"),
        (["worker", "--study", "x", "--llm-timeout", "-2"], "--llm-timeout must be a positive number of seconds"),
    ],
)
def test_the_cli_names_the_flag(
    argv: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    text = " ".join(capsys.readouterr().err.split())
    assert says in text and "Traceback" not in text
    assert list(tmp_path.iterdir()) == []  # refused before anything was created


@pytest.mark.parametrize(
    ("keywords", "says"),
    [
        ({"budget": -1}, "budget must be a number of evaluations, 0 or more (0: the front the free information predicts), got -1"),
        ({"seed": 2**22}, "seed must be an integer from 0 to 4194303, got 4194304"),
        ({"reasoner": "remote"}, "reasoner.kind: input should be 'auto', 'offline' or 'llm', got 'remote'"),
        ({"reasoner": {"kind": "llm", "timeout_s": 0}}, "reasoner.timeout_s must be a positive number of seconds"),
        ({"reasoner": {"temperature": 0.1}}, "no setting 'reasoner.temperature'"),
        ({"proposer": "tpe", "reasoner": "offline"}, "takes no reasoner"),
        ({"options": {"device": "tpu"}}, "device: unknown device 'tpu'"),
    ],
)
def test_the_api_names_the_keyword(keywords: dict[str, Any], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserInputError) as exc:
        coevo.optimize("nb201", **keywords)
    assert says in str(exc.value) and "\n" not in str(exc.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tool", ["search.run", "search.start"])
@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"proposer": "bogus"}, "valid proposers"),
        ({"options": {"device": "tpu"}}, "device: unknown device 'tpu'"),
        ({"options": {"nosuch": 1}}, "no option 'nosuch'"),
        # the values are SearchConfig's to check, with its message (the tools once had bounds of their own)
        ({"budget": -1}, r"^search\.\w+: budget must be a number of evaluations, 0 or more"),
        ({"seed": -3}, r"seed must be an integer from 0 to 4194303, got -3"),
        ({"eval_timeout_s": 0}, r"eval_timeout_s must be a positive number of seconds"),
    ],
)
def test_the_search_tools_name_the_field(
    tool: str, arguments: dict[str, Any], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ToolArgumentError, match=says):
        call_tool(REGISTRY.get(tool), arguments)
    assert list(tmp_path.iterdir()) == []  # no study, no runs/jobs log


def test_the_search_tool_runs_the_budget_0_front_the_cli_and_the_api_offer(storage: str) -> None:
    """A budget of 0 (the front the free information predicts) was refused by search.run's own bound (ge=1)."""
    result = call_tool(REGISTRY.get("search.run"), {"proposer": "random", "budget": 0, "storage": storage}).value
    assert result["budget"] == 0 and result["paid"] == 0 and result["hv_ratio"] is not None


# ---------------------------------------------------------------- a configuration travels as flags and back


def test_a_background_search_gets_the_same_configuration_back_from_its_command_line() -> None:
    config = SearchConfig.create(
        options={"dataset": "cifar100", "device": "pixel3"},
        proposer="pelnas-nokb",
        budget=7,
        seed=3,
        storage="sqlite:///runs/x.sqlite3",
        study="bg",
        reasoner={
            "kind": "llm",
            "base_url": "http://127.0.0.1:1/v1",
            "model": "m",
            "price_per_mtok": (0.5, 1.5),
            "timeout_s": 9.5,
            "tools": False,
        },
        engine={"round_size": 6, "kb_tokens": 120, "screen": "llm"},
    )
    assert search_config(_parse("search", *config.to_argv())) == config
    baseline = SearchConfig.create(proposer="tpe", budget=5)
    assert search_config(_parse("search", *baseline.to_argv())) == baseline
    # the proposer's own reasoner (None: offline) is said on the command line, whose default would be auto
    engine = SearchConfig.create(budget=5)
    assert "--reasoner" in engine.to_argv() and search_config(_parse("search", *engine.to_argv())).reasoner == ReasonerConfig(
        kind="offline"
    )


def test_an_api_key_never_reaches_a_command_line_or_the_study() -> None:
    config = SearchConfig.create(reasoner={"kind": "llm", "model": "m", "base_url": "http://h/v1", "api_key": "sk-secret"})
    assert "sk-secret" not in " ".join(config.to_argv()) and "sk-secret" not in repr(config)
    assert "sk-secret" not in json.dumps(config.reasoner.model_dump())  # type: ignore[union-attr]
    assert config.reasoner.settings()["api_key"] == "sk-secret"  # type: ignore[union-attr]  # in memory, for the run process


# ---------------------------------------------------------------- workers rebuild it from the study


def test_a_worker_rebuilds_an_llm_study_stored_in_the_old_form() -> None:
    stored = SimpleNamespace(
        problem=NB201Problem(dataset="cifar10", device="fpga"),
        proposer="pelnas",
        seed=2,
        budget=40,
        proposer_options={
            **{k: v for k, v in OLD_OPTIONS.items() if k != "reasoner"},
            "reasoner": {"kind": "llm", "model": "sim-mutate", "base_url": "simulated", "timeout_s": 30.0, "price_per_mtok": [0.5, 1.5]},
        },
    )
    config, proposer = joined_search(stored, ReasonerConfig(), storage=None, study="old-llm")
    assert config.seed == 2 and config.reasoner is not None and config.reasoner.tools  # no "tools" stored then: on, as before
    reasoner = proposer.reasoner  # type: ignore[attr-defined]
    assert reasoner.label == "simulated:sim-mutate (no LLM)"
    assert reasoner.config()["timeout_s"] == 30.0 and reasoner.config()["price_per_mtok"] == [0.5, 1.5]
    assert proposer.round_size == 4 and proposer.screen == "on"  # type: ignore[attr-defined]  # no "screen" stored then: the default
    with pytest.raises(UserInputError, match="cannot join it with --llm-model other"):
        joined_search(stored, ReasonerConfig(model="other"), storage=None, study="old-llm")


@pytest.mark.parametrize(
    ("stored_options", "flags", "round_size"),
    [
        pytest.param(OLD_OPTIONS, [], 4, id="options stored in the old form"),
        pytest.param({}, ["--round-size", "5"], 5, id="no options stored: the flags"),
    ],
)
def test_a_worker_resumes_an_old_study(
    stored_options: dict[str, Any], flags: list[str], round_size: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    config = SearchConfig.create(options={"device": "fpga"}, budget=16, storage=storage, study="old", engine={"round_size": 8})
    config.run(proposer=make_proposer(config))
    study = optuna.load_study(study_name="old", storage=storage)
    study.set_user_attr("coevo.proposer_options", stored_options)  # as the study was written before this change
    study.set_user_attr("coevo.budget", 40)
    rounds_before = int(study.user_attrs["coevo.round"])
    assert main(["worker", "--storage", storage, "--study", "old", "--json", *FAST, *flags]) == 0
    assert json.loads(capsys.readouterr().out)["rounds_led"] >= 2
    study = optuna.load_study(study_name="old", storage=storage)
    per_round = Counter(t.user_attrs["round"] for t in study.get_trials(deepcopy=False) if t.user_attrs.get("round", -1) >= rounds_before)
    assert per_round and max(per_round.values()) <= round_size < 8  # the stored (or given) round size, not the creator's
    assert paid_count(study) == 40


# ---------------------------------------------------------------- the main job on embedded defaults


def test_coevo_search_with_no_flags_runs_pelnas_offline_on_sqlite_under_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in coevo_env().items() if k not in ENV}
    proc = subprocess.run(
        [sys.executable, "-m", "coevo.agent.cli", "search", "--budget", "20", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["proposer"] == "pelnas" and data["reasoner"] == "offline (no LLM)" and data["problem"]["problem"] == "nb201"
    assert (tmp_path / "runs" / "coevo.sqlite3").exists() and data["evaluations"] == 20
    assert "reasoner: offline (no LLM)" in proc.stderr  # said so


def test_choice_flags_offer_the_configurations_values() -> None:
    """--reasoner and --screen list what ReasonerConfig.kind and EngineOptions.screen accept, as --kb-from-use does."""
    from typing import get_args

    from coevo.agent.coevolution import SCREENS
    from coevo.search.config import KB_FROM_USES, ReasonerKind, Screen

    parser = argparse.ArgumentParser()
    from coevo.agent.cli import search as search_cli

    search_cli.add_arguments(parser, None)
    choices = {a.dest: tuple(a.choices) for a in parser._actions if a.choices}
    assert choices["reasoner"] == get_args(ReasonerKind) and choices["screen"] == get_args(Screen) == SCREENS
    assert choices["kb_from_use"] == KB_FROM_USES


@pytest.mark.parametrize(
    ("kind", "env", "resolved"),
    [("auto", True, "llm"), ("auto", False, "offline"), ("offline", True, "offline"), ("llm", False, "llm")],
)
def test_one_resolution_of_the_auto_reasoner(kind: str, env: bool, resolved: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """coevo bench resolved auto with its own copy of build_reasoner's rule; both read resolve_kind now."""
    from coevo.agent.reasoners import build_reasoner, resolve_kind

    for name in ("COEVO_LLM_BASE_URL", "COEVO_LLM_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    if env:
        monkeypatch.setenv("COEVO_LLM_BASE_URL", "http://127.0.0.1:9/v1")
        monkeypatch.setenv("COEVO_LLM_MODEL", "m")
    config = ReasonerConfig.create(kind=kind)
    assert resolve_kind(config) == resolved
    if kind == "auto":
        assert build_reasoner(config).label.startswith(resolved)


@pytest.mark.parametrize(
    ("kind", "env", "says"),
    [
        ("auto", {}, "Set COEVO_LLM_BASE_URL and COEVO_LLM_MODEL"),
        (
            "auto",
            {"COEVO_LLM_BASE_URL": "http://127.0.0.1:9/v1"},
            "an endpoint is set (http://127.0.0.1:9/v1) but no model; set COEVO_LLM_MODEL",
        ),
        ("auto", {"COEVO_LLM_MODEL": "m"}, "a model is set (m) but no endpoint; set COEVO_LLM_BASE_URL"),
        ("offline", {"COEVO_LLM_BASE_URL": "http://127.0.0.1:9/v1", "COEVO_LLM_MODEL": "m"}, "as asked (--reasoner offline)"),
    ],
)
def test_the_offline_line_says_why_the_llm_is_not_used(kind: str, env: dict[str, str], says: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """It asked to set both variables when one was set, and when the user had chosen offline with both set."""
    from coevo.agent.reasoners import build_reasoner, offline_note

    for name in ("COEVO_LLM_BASE_URL", "COEVO_LLM_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = ReasonerConfig.create(kind=kind)
    line = offline_note(config)
    assert line.startswith("reasoner: offline (no LLM)") and says in line
    assert getattr(build_reasoner(config), "note", None) == line


def test_a_worker_joining_an_offline_study_says_it_is_the_study_s_reasoner() -> None:
    from coevo.agent.reasoners import reasoner_from_config

    assert getattr(reasoner_from_config({"kind": "offline"}), "note", "") == "reasoner: offline (no LLM), the study's reasoner"
