"""Every table the CLI and chat print shows its numbers and names whole, at any width and when piped (issue 33, item 1),
and ``coevo tools run`` prints strict JSON for machines and a compact rendering for people (item 3)."""

from __future__ import annotations

import io
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from coevo.agent.cli import main
from coevo.agent.tables import Column, print_design_table, print_table, render_value
from coevo.search.strict_json import strict_json_value
from coevo.tools import REGISTRY, ToolResult

WIDTHS = [60, 80, 120, None]  # None: piped, rich's default width for a file that is no terminal
ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"
STUDY = "nb201-cifar10-fpga-pelnas-s0"


@pytest.fixture(params=WIDTHS, ids=lambda w: f"width{w}" if w else "piped")
def console(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Console]:
    monkeypatch.delenv("COLUMNS", raising=False)
    yield Console(file=io.StringIO(), width=request.param, force_terminal=False, color_system=None)


def _text(console: Console) -> str:
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def assert_whole(text: str, tokens: list[str], width: int) -> None:
    """Each token (a number, a name, a header's word: headers wrap between words) sits whole on one line, and every
    table fits the width.

    Lines outside a table (records, designs listed below a table) may be longer: the terminal wraps
    them, and they copy whole.
    """
    lines = text.splitlines()
    for token in (word for t in tokens for word in t.split()):
        assert any(token in line for line in lines), f"{token!r} is cut in:\n{text}"
    assert "…" not in text
    for line in lines:
        if any(border in line for border in "│┃┏┗┡└┌"):
            assert len(line) <= width, f"a table wider than {width}:\n{text}"


# the fpga-transformer front of the issue: long headers, numbers with many digits, a long design string
FRONT_HEADER = ["makespan_ms", "accuracy_pct", "energy_mj", "point id", "paid"]
FRONT_ROWS = [
    ["11.8312", "0.912345", "3.1416", "p-00017", "yes"],
    ["12.0045", "0.931002", "2.7183", "p-00123", "predicted"],
]
FRONT_DESIGNS = ["layers=12,heads=8,d_model=512,ffn=2048,tile_m=64,tile_n=64,pe=256,bram=1024", "layers=6,heads=4,d_model=256,ffn=1024"]


def test_design_table(console: Console) -> None:
    print_design_table(
        console, "found front (2 non-dominated of 20 evaluated)", FRONT_HEADER, FRONT_ROWS, FRONT_DESIGNS, design_header="config"
    )
    text = _text(console)
    assert_whole(text, [*FRONT_HEADER, *(c for r in FRONT_ROWS for c in r), *FRONT_DESIGNS], console.width)
    if not any(FRONT_DESIGNS[0] in line and "11.8312" in line for line in text.splitlines()):
        # listed below the table: each design by the row number the table shows
        assert any(line.strip() == f"1  {FRONT_DESIGNS[0]}" for line in text.splitlines())
        assert any(line.strip("│ ").startswith("2 ") and "12.0045" in line for line in text.splitlines()) or "#2" in text


def test_runs_list_and_show(console: Console) -> None:
    from coevo.agent.cli.runs import print_list, print_show

    rows: list[dict[str, Any]] = [
        {
            "study": STUDY,
            "proposer": "pelnas",
            "budget_used": 20,
            "paid": 20,
            "budget": 30,
            "failed": 0,
            "hv_ratio": 0.912345,
            "workers_alive": 2,
        },
        {
            "study": "fpga-transformer-coevolution-seed-12345",
            "proposer": "coevolution",
            "budget_used": 7,
            "paid": 0,  # zero-cost: none paid
            "budget": 300,
            "failed": 1,
            "hv_ratio": None,
            "workers_alive": 0,
        },
    ]
    print_list(console, rows)
    text = _text(console)
    assert_whole(
        text,
        [STUDY, "fpga-transformer-coevolution-seed-12345", "pelnas", "coevolution", "20/30", "7/300", "0.9123", "used/budget"],
        console.width,
    )

    info = {
        "problem": {"name": "nb201", "dataset": "cifar10", "device": "fpga", "objectives": ["accuracy", "latency_ms"]},
        "proposer": "pelnas", "evaluations": 20, "failed": 0, "budget_used": 20, "paid": 20, "budget": 30, "round": 4,
        "states": {"COMPLETE": 20, "RUNNING": 1}, "hv_ratio": 0.987654321, "front_recall": 0.5, "front_size": 6, "workers_alive": 1,
        "workers": [{"worker": "host-a-31337-0", "host": "host-a.example.org", "pid": 31337, "state": "running", "alive": True,
                     "evaluations": 12, "last_seen": time.time(), "note": "evaluating trial 21 of the second round"}],
    }  # fmt: skip
    console.file = io.StringIO()
    print_show(console, STUDY, info)
    text = _text(console)
    assert_whole(text, [STUDY, "pelnas", "0.9877", "host-a-31337-0", "host-a.example.org", "31337", "evaluations", "12"], console.width)
    assert "nb201" in text and "latency_ms" in text


def test_search_summary_and_front(console: Console, monkeypatch: pytest.MonkeyPatch) -> None:
    from coevo.agent.cli import search

    monkeypatch.setattr(search, "out", console)
    monkeypatch.setattr(search, "err", Console(file=io.StringIO()))
    objectives = [SimpleNamespace(name="accuracy_pct"), SimpleNamespace(name="makespan_ms")]
    problem = SimpleNamespace(objectives=objectives, design_label="config", front_objectives=("accuracy_pct", "makespan_ms"))
    front = [
        {"accuracy_pct": 91.2345, "makespan_ms": 11.8312, "point_id": "p-00017", "config": FRONT_DESIGNS[0]},
        {"accuracy_pct": 93.1002, "makespan_ms": 12.0045, "point_id": "p-00123", "config": FRONT_DESIGNS[1], "paid": False},
    ]
    result = SimpleNamespace(
        failed=0, notes=[], stopped=None, study="fpga-transformer-pelnas-s0", problem="fpga-transformer", proposer="pelnas",
        reasoner="offline", seed=0, evaluations=20, trials=21, hv_ratio=0.87654, igd=0.0123456, front_recall=0.5, wall_s=12.345678,
        storage="sqlite:///runs/a-rather-long-directory-name/coevo.sqlite3", front=front, budget_used=20, paid=20, answered=1,
        found_set="predicted", reported=9,
    )  # fmt: skip
    assert search.print_search(problem, result) == 0
    text = _text(console)
    tokens = ["fpga-transformer-pelnas-s0", "fpga-transformer", "pelnas", "0.8765", "0.0123", "12.345678", "makespan_ms", "accuracy_pct"]
    assert_whole(
        text,
        [*tokens, "sqlite:///runs/a-rather-long-directory-name/coevo.sqlite3", "11.83", "91.23", "p-00123", *FRONT_DESIGNS],
        console.width,
    )


def test_tools_list(console: Console, monkeypatch: pytest.MonkeyPatch) -> None:
    from coevo.agent.cli import tools

    monkeypatch.setattr(tools, "out", console)
    assert main(["tools", "list"]) == 0
    assert_whole(_text(console), [t.name for t in REGISTRY], console.width)


@pytest.mark.parametrize("command", ["_help", "_tools"])
def test_chat_help_and_tools(console: Console, command: str) -> None:
    from coevo.agent.chat import commands

    handler: Callable[..., Any] = getattr(commands, command)
    handler(SimpleNamespace(console=console, registry=REGISTRY), "")
    names = [t.name for t in REGISTRY] if command == "_tools" else [u for _, u, _ in commands.COMMANDS.values() if " " not in u]
    assert_whole(_text(console), names, console.width)


def test_render_value_studies(console: Console) -> None:
    """``/runs``: a problem-JSON column must not take the width proposer, budget and trials need."""
    problem = {"name": "nb201", "dataset": "cifar10", "device": "fpga", "options": {"kb_from": "none", "niche": "latency"}}
    value = {
        "storage": "sqlite:///runs/coevo.sqlite3",
        "studies": [
            {"study": STUDY, "problem": problem, "proposer": "pelnas", "budget": 300, "trials": 123, "hv_ratio": 0.9876543},
            {"study": "fpga-transformer-coevolution-s1", "problem": problem, "proposer": "coevolution", "budget": 20, "trials": 7,
             "hv_ratio": None},
        ],
    }  # fmt: skip
    render_value(console, value)
    text = _text(console)
    assert_whole(
        text,
        [STUDY, "fpga-transformer-coevolution-s1", "pelnas", "coevolution", "300", "123", "0.9877", "sqlite:///runs/coevo.sqlite3"],
        console.width,
    )
    assert '"dataset"' in text


def test_render_value_tool_result(console: Console) -> None:
    value = {
        "index": 9586,
        "arch": ARCH,
        "accuracy_pct": 94.24,
        "latency_ms": 6.16336,
        "mean_delay_cycles": math.nan,
        "on_true_front": False,
    }
    plans = {"skip-aware": {"imbalance": 1.4129, "skip_bytes": 0}, "blockwise-bytes": {"imbalance": 1.2428, "skip_bytes": 64061440}}
    render_value(console, {**value, "plans": plans})  # records by name: a table with a name column, not one JSON cell
    text = _text(console)
    assert_whole(
        text, ["9586", ARCH, "94.24", "6.163", "on_true_front", "no", "nan", "skip-aware", "blockwise-bytes", "64061440"], console.width
    )
    assert "plans (2)" in text and '"imbalance"' not in text


def test_render_value_names_keys_without_a_value_instead_of_empty_rows(console: Console) -> None:
    # a search's summary had rows "stopped", "reasoner", "llm_usage" with nothing in them, and its
    # notes twice: in the table and as the note lines the caller prints after it
    value = {"study": STUDY, "hv_ratio": 0.75, "stopped": None, "reasoner": "", "llm_usage": {}, "failures": [], "notes": ["one note"]}
    render_value(console, value, notes=["one note"])
    text = _text(console)
    rows = [line for line in text.splitlines() if "│" in line]
    assert any("hv_ratio" in r for r in rows) and not any(k in r for r in rows for k in ("stopped", "llm_usage", "failures", "notes"))
    assert "no value: stopped, reasoner; empty: llm_usage, failures" in text and "one note" not in text
    render_value(console, {"notes": ["other"]}, notes=["one note"])  # notes that are not the messages stay
    assert "other" in _text(console)
    render_value(console, {"stopped": "budget spent", "notes": ["a note"]}, notes=["budget spent", "a note"])
    assert "a note" not in _text(console)  # search.run's messages are its stop reason and its notes


def test_free_text_wraps_between_words_only(console: Console) -> None:
    sentence = "a description long enough to wrap on a narrow terminal but never inside one of its words"
    words = sentence.split(" ")
    print_table(console, "t", [Column("name"), Column("description", text=True)], [["nb201.query", sentence]])
    text = _text(console)
    assert_whole(text, ["nb201.query", *words], console.width)


def test_strict_json_value() -> None:
    raw = {"mean_delay": math.nan, "p99": math.inf, "share": 99.32659932659932, "delays": [1.0, -math.inf], "pair": (1, 2), "ok": True}
    strict = strict_json_value(raw)
    text = json.dumps(strict, allow_nan=False)  # strict parsers accept it
    assert json.loads(text) == {
        "mean_delay": None,
        "mean_delay_note": strict["mean_delay_note"],
        "p99": None,
        "p99_note": strict["p99_note"],
        "share": 99.32660,
        "delays": [1.0, None],
        "delays_note": strict["delays_note"],
        "pair": [1, 2],
        "ok": True,
    }
    assert "NaN" in strict["mean_delay_note"] and "infinite" in strict["p99_note"]
    assert (
        ToolResult(value={"x": math.nan}).to_strict_json(indent=None)
        == '{"value": {"x": null, "x_note": ' + json.dumps(strict["mean_delay_note"]) + '}, "messages": []}'
    )


def test_tools_run_json_and_terminal(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["tools", "run", "nb201.query", "--args", json.dumps({"arch": ARCH, "dataset": "cifar10", "device": "fpga"})]
    assert main([*argv, "--json"]) == 0

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} in strict JSON")

    value = json.loads(capsys.readouterr().out, parse_constant=no_constants)["value"]
    assert value["arch"] == ARCH and value["accuracy_pct"] == pytest.approx(94.3633)
    assert main(argv) == 0  # piped (capsys is no terminal): the same JSON
    assert json.loads(capsys.readouterr().out, parse_constant=no_constants)["value"] == value
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(argv) == 0  # a terminal: the compact rendering chat's /run shows
    text = capsys.readouterr().out
    assert not text.lstrip().startswith("{") and ARCH in text and "94.36" in text and "accuracy_pct" in text


def test_noc_simulate_json_is_strict_with_units(capsys: pytest.CaptureFixture[str]) -> None:
    """A mesh without guaranteed-bandwidth flows has no GT metrics: strict JSON says null and why, never NaN."""
    args = {"topology": "mesh", "k": 2, "cycles": 200, "gt_share": 0}
    assert main(["tools", "run", "noc.simulate", "--json", "--args", json.dumps(args)]) == 0

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} in strict JSON")

    value = json.loads(capsys.readouterr().out, parse_constant=no_constants)["value"]
    assert {"throughput_share", "mean_delay_cycles", "p99_delay_cycles"} <= set(value)
    assert not {"throughput", "mean_delay", "p99_delay"} & set(value)
    assert value["gt_acceptance"] is None and "NaN" in value["gt_acceptance_note"]


def test_a_search_with_nothing_evaluated_says_so_instead_of_an_empty_front_table(capsys: pytest.CaptureFixture[str]) -> None:
    from coevo.agent.cli.search import print_search

    problem = SimpleNamespace(
        objectives=[SimpleNamespace(name="a"), SimpleNamespace(name="b")], design_label="d", front_objectives=("a", "b")
    )
    base = {"failed": 0, "notes": [], "stopped": "stopped by a signal", "problem": {}, "proposer": "random", "reasoner": None, "seed": 0}
    base |= {"evaluations": 0, "trials": 1, "hv_ratio": None, "igd": None, "front_recall": None, "wall_s": 1.0, "storage": "x"}
    base |= {"study": "s", "front": [], "answered": 0, "paid": 0, "budget_used": 0, "budget": 4, "found_set": "all", "reported": 0}
    capsys.readouterr()
    assert print_search(problem, SimpleNamespace(**base)) == 0
    out = capsys.readouterr().out
    assert "front: none yet (nothing evaluated)" in out and "point id" not in out
    assert print_search(problem, SimpleNamespace(**(base | {"failed": 2, "budget_used": 2, "failures": []}))) == 0
    assert "front: none (no evaluation succeeded)" in capsys.readouterr().out
