from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coevo.agent.cli import main

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"
ROOT = Path(__file__).resolve().parents[2]


def test_search_json(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    assert (
        main(
            ["search", "--dataset", "cifar100", "--device", "pixel3", "--proposer", "tpe", "--budget", "15", "--storage", storage, "--json"]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    for key in ("hv_ratio", "igd", "front_recall", "evaluations", "expensive_queries", "wall_s", "front"):
        assert key in data
    assert data["evaluations"] == data["expensive_queries"] == 15
    assert all(set(row) >= {"arch", "accuracy", "latency_ms"} for row in data["front"])


def test_search_table(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    assert main(["search", "--budget", "5", "--proposer", "random", "--storage", storage]) == 0
    said = capsys.readouterr()
    assert "hv_ratio" in said.out and "found front" in said.out
    assert "ignored" not in said.err


def test_reasoner_flags_for_a_proposer_without_a_reasoner_are_said_to_be_ignored(
    capsys: pytest.CaptureFixture[str], storage: str, tmp_path: Path
) -> None:
    argv = ["search", "--budget", "3", "--proposer", "random", "--storage", storage, "--reasoner", "llm", "--llm-model", "m"]
    assert main(argv) == 0
    assert "note: --reasoner, --llm-model ignored: proposer 'random' takes no reasoner" in " ".join(capsys.readouterr().err.split())
    bench = ["bench", "--devices", "fpga", "--proposers", "random", "--budget", "3", "--seeds", "1", "--out", str(tmp_path / "b")]
    assert main([*bench, "--llm-model", "m"]) == 0
    assert "note: --llm-model ignored: none of the proposers takes a reasoner" in " ".join(capsys.readouterr().err.split())


def test_tools_list_describe_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {t["name"] for t in listed} >= {"nb201.query", "nb201.pareto_front", "search.run"}
    assert main(["tools", "describe", "nb201.query"]) == 0
    assert json.loads(capsys.readouterr().out)["llm_name"] == "nb201_query"
    assert main(["tools", "run", "nb201.query", "--args", json.dumps({"arch": ARCH, "dataset": "cifar10", "device": "fpga"})]) == 0
    value = json.loads(capsys.readouterr().out)["value"]
    assert value["accuracy_pct"] == pytest.approx(94.3633) and value["latency_ms"] == pytest.approx(7.42096)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "--budget", "-3"], "budget must be a number of evaluations, 0 or more"),
        (["search", "--device", "tpu"], "valid devices"),
        (["search", "--device", "[nan]"], "unknown device '[nan]'"),  # brackets in a message are text, not console markup
        (["search", "--options", '{"dataset": "mnist"}'], "dataset: input should be 'cifar10', 'cifar100' or 'imagenet16_120'"),
        (["search", "--proposer", "bogus"], "valid proposers"),
        (["search", "--problem", "bogus"], "valid problems"),
        (["search", "--storage", "sqlite:///missing/dir/x.db"], "does not exist"),
        (["tools", "run", "nb201.query", "--args", "{oops"], "not valid JSON"),
        (["tools", "run", "nb201.query", "--args", '{"arch": "|x~0|"}'], "malformed NB201 arch"),
        (["tools", "run", "no.such"], "valid tools"),
        (["bench", "--devices", "fpga,tpu", "--budget", "3", "--seeds", "1"], "unknown device"),
    ],
)
def test_user_errors_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert "Traceback" not in captured.err
    assert not Path("runs").exists() and not Path("bench-out").exists()


def test_console_script_prints_no_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "coevo.agent.cli", "search", "--device", "nope"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: problem 'nb201': device: unknown device 'nope'") and "Traceback" not in proc.stderr


def test_bench_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "b"
    assert main(["bench", "--devices", "fpga", "--proposers", "random,nsga2", "--budget", "8", "--seeds", "2", "--out", str(out)]) == 0
    assert (out / "runs.csv").exists() and (out / "results.md").exists() and (out / "hv_fpga.png").exists()
    assert "nsga2" in capsys.readouterr().out


@pytest.mark.slow  # 11 s on an idle 2-core machine: out of the fast loop (make test-fast), still in CI
def test_runs_delete_removes_the_study_and_what_coevo_keeps_for_it(
    storage: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    import optuna

    from coevo.agent.reasoners.cache import CachedReply, ResponseCache
    from coevo.knowledge.store import KnowledgeStore
    from coevo.search.round_log import RoundLogs
    from coevo.search.workers import Coordination

    assert main(["search", "--proposer", "pelnas", "--budget", "50", "--storage", storage, "--study", "gone", "--json"]) == 0
    assert main(["search", "--proposer", "pelnas", "--budget", "30", "--storage", storage, "--study", "kept", "--json"]) == 0
    ResponseCache(storage).put("gone", "k", "m", CachedReply("x", 1, 1))  # as an LLM reasoner would have
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal: no question can be answered
    assert main(["runs", "delete", "gone", "--storage", storage]) == 2
    assert "pass --yes" in capsys.readouterr().err
    assert "gone" in [s.study_name for s in optuna.get_all_study_summaries(storage)]  # asked, not answered: nothing deleted
    assert main(["runs", "delete", "gone", "--storage", storage, "--yes"]) == 0
    said = " ".join(capsys.readouterr().out.split())  # rich folds long lines
    assert "deleted study 'gone' (50 trials)" in said and "knowledge base" in said and "round logs" in said
    assert [s.study_name for s in optuna.get_all_study_summaries(storage)] == ["kept"]
    store = KnowledgeStore.for_storage(storage)
    assert not store.exists("gone") and store.exists("kept")
    assert RoundLogs(storage).count("gone") == 0 and RoundLogs(storage).count("kept") > 0
    assert Coordination(storage, "gone").counts() == (0, 0) and Coordination(storage, "kept").counts() == (30, 30)
    assert len(ResponseCache(storage)) == 0


def test_read_only_commands_create_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "list"]) == 0  # the default storage does not exist yet: an answer, not an error
    assert "no searches" in capsys.readouterr().err
    # a storage named on the command line that is not there is a typo: exit 2, as chat's /runs says
    assert main(["runs", "list", "--storage", f"sqlite:///{tmp_path / 'typo.sqlite3'}"]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "does not exist (check the path, or run a search that writes there first); nothing to list" in said, said
    assert main(["kb", "list"]) == 2
    assert main(["chat", "--once", "/runs", "--storage", f"sqlite:///{tmp_path / 'typo.sqlite3'}"]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no runs/, no SQLite file


def _summary_rows(text: str) -> dict[str, str]:
    """The key/value rows of a summary table (printed wide enough that no row wraps)."""
    cells = [[c.strip() for c in line.strip().strip("│").split("│")] for line in text.splitlines() if line.startswith("│")]
    return {row[0]: row[1] for row in cells if len(row) == 2}


def test_search_and_runs_show_summaries_write_the_problem_alike(storage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The problem as JSON in both summaries; n/a, never None, for what a search without an exact front lacks; trials explained."""
    import io

    import optuna
    from rich.console import Console

    from coevo.agent.cli import runs, search

    consoles = {}
    for module in (search, runs):
        consoles[module] = Console(file=io.StringIO(), width=250, color_system=None)
        monkeypatch.setattr(module, "out", consoles[module])
    options = ["--options", '{"k": 4, "cycles": 300}']
    assert (
        main(["search", "--problem", "noc", *options, "--proposer", "random", "--budget", "8", "--storage", storage, "--study", "n"]) == 0
    )
    assert main(["runs", "show", "n", "--storage", storage]) == 0
    texts = {module: console.file.getvalue() for module, console in consoles.items()}  # type: ignore[attr-defined]
    found, shown = _summary_rows(texts[search]), _summary_rows(texts[runs])
    noc = {
        "problem": "noc",
        "topology": "mesh",
        "k": 4,
        "traffic": "hotspot",
        "load": 0.3,
        "gt_share": 0.7,
        "cycles": 300,
        "traffic_seed": 0,
    }
    assert json.loads(found["problem"]) == noc and shown["problem"] == found["problem"]
    assert found["hv_ratio"] == found["igd"] == found["reasoner"] == shown["hv_ratio"] == shown["round"] == "n/a"  # noc: no exact front
    assert all("None" not in text for text in texts.values())
    trials = len(optuna.load_study(study_name="n", storage=storage).trials)
    assert trials > 8  # the random sampler proposes some designs twice; the study answers them free
    assert found["trials"] == f"{trials} (8 paid evaluations; {trials - 8} repeats answered free from the study)"


def test_trials_are_told_apart_from_paid_evaluations() -> None:
    from types import SimpleNamespace

    from coevo.agent.cli.search import trials_text

    def result(trials: int, used: int, failed: int, answered: int, paid: int | None = None) -> SimpleNamespace:
        return SimpleNamespace(trials=trials, budget_used=used, paid=used if paid is None else paid, failed=failed, answered=answered)

    assert trials_text(result(109, 100, 3, 9)) == "109 (100 paid evaluations, 3 of them failed; 9 repeats answered free from the study)"
    assert trials_text(result(30, 30, 0, 0)) == "30 (30 paid evaluations)"
    # a stopped search leaves trials waiting: they are not repeats answered free
    assert trials_text(result(44, 34, 0, 0)) == "44 (34 paid evaluations; 10 skipped, re-queued or waiting)"
    # zero-cost mode: the budget counts evaluations on the proxies' estimate, and nothing is paid
    assert trials_text(result(100, 100, 0, 0, paid=0)) == "100 (100 evaluations on estimated objectives, none paid)"


def test_runs_delete_removes_the_background_log_and_pid_file_search_start_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log is where search.start writes it (a sanitized name) and the pid file goes too: a stale pid made search.status say running."""
    from coevo.tools.search_jobs import log_path, process_state

    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 's.sqlite3'}"
    study = "team/a b"  # a name the log file cannot carry as it is
    assert main(["search", "--proposer", "random", "--budget", "2", "--storage", storage, "--study", study, "--json"]) == 0
    log = log_path(study)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("{}\n")
    log.with_suffix(".pid").write_text(f"{os.getpid()}\n")  # a live pid (this process), as a reused one would be
    assert process_state(study) == "running"
    capsys.readouterr()
    assert main(["runs", "delete", study, "--storage", storage, "--yes"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "background log" in said and "background pid file" in said
    assert not log.exists() and not log.with_suffix(".pid").exists() and process_state(study) is None
