"""The tables of ``coevo models list``, ``coevo bench``, ``coevo kb list`` and ``coevo kb show`` at 80 and 60 columns:
no ``…``, no word folded inside, and a table too wide for the terminal printed as records (docs/usage.md).

Each command is rendered twice: on a console wide enough for every table to fit with its cells on one
line, which gives the words a cell may hold, and at the width under test, where every word in a table
cell must be one of those (a word cut by rich, ``propos`` + ``ed``, is not).
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from rich.console import Console

from coevo.agent.cli import main

WIDE = 1000
"""A console on which every table fits with each cell on one line."""

BORDERS = "│┃"


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("COLUMNS", raising=False)  # the console's width is the test's, not the terminal's
    yield


def render(monkeypatch: pytest.MonkeyPatch, module: ModuleType, argv: list[str], width: int) -> str:
    """What ``coevo ARGV`` prints on its ``out`` console, at ``width`` columns, piped (no terminal)."""
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    monkeypatch.setattr(module, "out", console)
    assert main(argv) == 0
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


def _cell_words(line: str) -> list[str]:
    return [w for cell in re.split(f"[{BORDERS}]", line) for w in cell.split()]


def assert_nothing_cut(text: str, wide: str, width: int, tokens: list[str]) -> None:
    """``text`` (rendered at ``width``) cuts nothing that ``wide`` (the same output on a wide console) shows whole.

    Every table fits the width, no cell ends with ``…``, every word in a table cell is a word the wide
    rendering shows (a fold leaves pieces that are not), and each of ``tokens`` sits whole on one line.
    """
    assert "…" not in text, text
    # "#" and 1, 2, ...: the row-number column a table of designs gets when its designs are listed below it
    numbers = {"#", *(str(k) for k in range(1, 100))}
    vocabulary = numbers | {w for line in wide.splitlines() for w in _cell_words(line)}
    for line in text.splitlines():
        if any(b in line for b in BORDERS):
            assert len(line) <= width, f"a table wider than {width}:\n{text}"
            pieces = [w for w in _cell_words(line) if w not in vocabulary]
            assert not pieces, f"{pieces} are pieces of words cut in:\n{text}"
    for token in tokens:
        assert any(token in line for line in text.splitlines()), f"{token!r} is cut in:\n{text}"


def _check(monkeypatch: pytest.MonkeyPatch, module: ModuleType, argv: list[str], tokens: Callable[[str], list[str]]) -> None:
    wide = render(monkeypatch, module, argv, WIDE)
    assert "…" not in wide
    for width in (80, 60):
        text = render(monkeypatch, module, argv, width)
        assert_nothing_cut(text, wide, width, tokens(wide))
        tables = [line for line in text.splitlines() if any(b in line for b in BORDERS)]
        # the table is shown when it fits, as records when it does not: either way every cell is there
        assert tables or re.search(r"^#1$", text, re.M) or "of each row:" in text, text


def test_models_list(monkeypatch: pytest.MonkeyPatch) -> None:
    from coevo.agent.cli import models
    from coevo.tools import REGISTRY, call_tool

    value = call_tool(REGISTRY.get("models.list"), {}).value
    names = [m["name"] for m in value["models"]]
    weights = [m["weights"] for m in value["models"] if m.get("weights")]
    about = [w for m in value["models"] for w in m["about"].split()]  # scikit-learn's, byte-level, ...
    _check(monkeypatch, models, ["models", "list"], lambda _: [*names, *weights, *about, "scikit-learn's", "byte-level"])


@pytest.fixture(scope="module")
def two_kbs(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A storage with two small pelnas searches (raspi4, fpga): ``kb list --all`` then has its kb column."""
    storage = f"sqlite:///{tmp_path_factory.mktemp('kb') / 's.sqlite3'}"
    for device, budget in (("raspi4", "30"), ("fpga", "20")):
        argv = ["search", "--proposer", "pelnas", "--budget", budget, "--device", device, "--storage", storage, "--json"]
        assert main(argv) == 0
    return storage


@pytest.mark.parametrize("extra", [["--all"], ["--device", "raspi4"]], ids=["all", "raspi4"])
def test_kb_list(monkeypatch: pytest.MonkeyPatch, two_kbs: str, extra: list[str]) -> None:
    from coevo.agent.cli import kb

    def tokens(wide: str) -> list[str]:
        words = ["sup/ref", "accuracy", "nb201-cifar10-raspi4-pelnas-s0"]
        return [*words, *(w for w in re.findall(r"\S+=\S+", wide) if "│" not in w)]  # edge_0_1=nor_conv_3x3

    _check(monkeypatch, kb, ["kb", "list", "--storage", two_kbs, *extra], tokens)


def test_kb_show(monkeypatch: pytest.MonkeyPatch, two_kbs: str) -> None:
    from coevo.agent.cli import kb

    def tokens(wide: str) -> list[str]:
        statuses = re.findall(r"\b\w+->\w+\b", wide)  # proposed->validated, where a version changed it
        return [*statuses, "H1", "proposed", "offline"]

    _check(monkeypatch, kb, ["kb", "show", "H1", "--device", "raspi4", "--storage", two_kbs], tokens)


def test_bench_tables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from coevo.agent.cli import bench

    argv = ["bench", "--proposers", "random,pelnas", "--budget", "12", "--seeds", "1", "--out", str(tmp_path / "bench")]
    # this call runs the bench; the calls at each width resume it from its storage (a second or so each), with the
    # same figures (a resumed run's wall time is the stored one, not that of the first call)
    assert main([*argv, "--json"]) == 0
    _check(monkeypatch, bench, argv, lambda _: ["random", "pelnas", "c3x3_4p", "band1", "proposer", "recall"])


def test_markdown_tables_of_a_report_keep_their_cells_whole() -> None:
    from coevo.agent.tables import print_markdown

    report = (
        "# bench\n\nsome prose\n\n| proposer | HV ratio | c3x3_4p |\n|---|:--:|---|\n"
        "| pelnas-nosurrogate | 0.9627 (1 seed) | 0.10 |\n| `random` \\| x | 0.7379 |\n"
    )
    for width in (80, 30):
        console = Console(file=io.StringIO(), width=width, color_system=None)
        print_markdown(console, report)
        file = console.file
        assert isinstance(file, io.StringIO)
        text = file.getvalue()
        assert "…" not in text and "pelnas-nosurrogate" in text and "c3x3_4p" in text and "random | x" in text
        assert ("#1" in text) == (width == 30)  # too narrow for the table: records


def test_a_title_wider_than_its_table_is_printed_whole() -> None:
    from coevo.agent.tables import print_table

    console = Console(file=io.StringIO(), width=80, color_system=None)
    title = "heuristics in nb201-cifar10-raspi4-pelnas-nokb-s0-with-a-long-suffix"
    print_table(console, title, ["id"], [["H1"]])
    file = console.file
    assert isinstance(file, io.StringIO)
    assert any(title in line for line in file.getvalue().splitlines())
