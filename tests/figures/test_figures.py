"""coevo.figures: the registry, the generated index pages, the shared writers and one re-render from saved data."""

from __future__ import annotations

import fnmatch
import importlib
import json
import shutil
from pathlib import Path

import pytest

from coevo.figures import FIGURES, Figure, get
from coevo.figures._cli import _run_printing, main
from coevo.figures._common import (
    PROVENANCE_FILE,
    mean_interval,
    mean_std,
    provenance_comment,
    read_csv,
    read_numbers,
    splice_block,
    strip_provenance,
    write_csv,
    write_markdown,
)
from coevo.figures._index import render_files

ROOT = Path(__file__).resolve().parents[2]


def test_committed_index_pages_are_what_the_registry_generates() -> None:
    # docs/benchmarks.md and docs/bench/README.md are generated: `python -m coevo.figures index` rewrites them
    for rel, text in render_files().items():
        assert (ROOT / rel).read_text() == text, f"{rel} is stale: run python -m coevo.figures index"


def test_every_figure_has_a_unique_name_and_a_runnable_module() -> None:
    names = [f.name for f in FIGURES]
    assert len(names) == len(set(names))
    for f in FIGURES:
        assert get(f.name) is f
        if f.module is not None:
            module = importlib.import_module(f"coevo.figures.{f.module}")
            assert callable(module.main), f.name
            assert getattr(module, "NAME", f.name) == f.name  # the module's parser takes its topic from this entry
        if f.renders:
            assert f.module is not None and f.data, f"{f.name}: --report-only needs a module and saved data"
        elif f.module is None or f.data:
            assert f.no_render, f"{f.name}: say why it cannot re-render"


def _patterns(rel: str) -> list[str]:
    rel = rel.split(" (")[0].replace("<model>", "*")
    return [rel + "*"] if rel.endswith("/") else [rel]


def test_every_file_under_docs_bench_belongs_to_a_figure_and_every_named_file_exists() -> None:
    bench = ROOT / "docs" / "bench"
    claimed: list[str] = []
    for f in FIGURES:
        for rel in (*f.outputs, *f.data):
            if rel.startswith("stdout"):
                continue
            for pattern in _patterns(f.path(rel)):
                claimed.append(pattern)
                if "*" not in pattern and pattern.startswith("docs/bench/"):
                    assert (ROOT / pattern).exists(), f"{f.name} names {pattern}, which is not there"
    for path in sorted(p for p in bench.rglob("*") if p.is_file()):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "docs/bench/README.md" or path.name == PROVENANCE_FILE:
            continue
        assert any(fnmatch.fnmatch(rel, p) for p in claimed), f"{rel} belongs to no figure of coevo.figures.FIGURES"


def test_a_printing_figure_saves_what_it_printed_and_nothing_when_it_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    figure = Figure("toy", "agent", "a toy report", "python -m coevo.figures toy", ("toy.md",), module="toy", prints=True)

    def report(argv: list[str]) -> int:
        print(f"median 12.5 ms over {argv[0]} turns")
        return 0 if argv[0] != "0" else 2

    assert _run_printing(figure, report, ["7", "--out", str(tmp_path)]) == 0
    assert "median 12.5 ms over 7 turns" in capsys.readouterr().out  # still printed to the terminal
    page = (tmp_path / "toy.md").read_text()
    first, _, body = page.partition("\n")
    assert json.loads(first.removeprefix("<!-- provenance: ").removesuffix(" -->"))["command"].endswith(f"toy 7 --out {tmp_path}")
    assert body.startswith("# a toy report") and "```text\nmedian 12.5 ms over 7 turns\n```" in body

    (tmp_path / "toy.md").unlink()
    assert _run_printing(figure, report, [f"--out={tmp_path}", "0"]) == 2
    assert not (tmp_path / "toy.md").exists()
    assert _run_printing(figure, report, ["7", "--out"]) == 2
    assert "--out needs a folder" in capsys.readouterr().err
    assert _run_printing(figure, report, ["7", "--out="]) == 2
    assert "--out needs a folder" in capsys.readouterr().err and not Path("toy.md").exists()


def test_no_figure_module_edits_sys_path() -> None:
    for path in (ROOT / "coevo" / "figures").glob("*.py"):
        assert "sys.path.insert" not in path.read_text(), path.name


def test_the_command_line_lists_and_refuses_what_it_cannot_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert all(f.name in listed for f in FIGURES)
    assert main(["rerem"]) == 2
    assert "did you mean reram" in capsys.readouterr().err
    assert main(["pipeline-cpsat-gloo", "--report-only"]) == 2  # it saves no data
    assert "no --report-only" in capsys.readouterr().err
    assert main(["nb201-baselines"]) == 2  # written by coevo bench
    assert "coevo bench" in capsys.readouterr().err


def test_splice_block_replaces_only_its_own_block_and_leaves_a_page_without_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "p.md"
    page.write_text("intro\n<!-- a:headline -->\nold\n<!-- /a:headline -->\n<!-- b:headline -->\nkeep\n<!-- /b:headline -->\n")
    assert splice_block(page, "a:headline", "new\nlines")
    assert (
        page.read_text()
        == "intro\n<!-- a:headline -->\nnew\nlines\n<!-- /a:headline -->\n<!-- b:headline -->\nkeep\n<!-- /b:headline -->\n"
    )
    before = page.read_text()
    assert not splice_block(page, "c:headline", "x")
    assert page.read_text() == before and "no <!-- c:headline --> block" in capsys.readouterr().err


def test_write_csv_records_provenance_and_reads_back(tmp_path: Path) -> None:
    rows = [{"a": 1, "b": "x"}, {"a": 2.5, "b": "y"}]
    write_csv(tmp_path / "t.csv", rows, command="python -m coevo.figures t")
    assert (tmp_path / "t.csv").read_bytes() == b"a,b\r\n1,x\r\n2.5,y\r\n"  # csv's own line ends, as every figure wrote them
    assert read_csv(tmp_path / "t.csv") == [{"a": "1", "b": "x"}, {"a": "2.5", "b": "y"}]
    assert read_numbers(tmp_path / "t.csv") == rows
    prov = json.loads((tmp_path / PROVENANCE_FILE).read_text())["t.csv"]
    assert prov["command"] == "python -m coevo.figures t"
    assert {"git", "load", "threads", "date", "python", "torch", "cpus"} <= set(prov)
    assert len(prov["load"]) == 3


def test_a_data_file_names_the_trained_zoo_weights_its_process_loaded(tmp_path: Path) -> None:
    from coevo.sim.zoo import load

    zm = load("cnn-digits")
    write_csv(tmp_path / "t.csv", [{"a": 1}], command="python -m coevo.figures t")
    prov = json.loads((tmp_path / PROVENANCE_FILE).read_text())["t.csv"]
    assert prov["zoo_models"]["cnn-digits seed 0"] == zm.fingerprint


def test_markdown_carries_its_provenance_on_one_comment_line(tmp_path: Path) -> None:
    written = write_markdown(tmp_path / "t.md", "# title\n\nbody\n", "python -m coevo.figures t --x '-->'")
    first, rest = written.split("\n", 1)
    assert rest == "# title\n\nbody\n" and strip_provenance(written) == rest
    assert first.startswith("<!-- provenance: ") and first.endswith(" -->") and first.count("-->") == 1
    assert json.loads(first.removeprefix("<!-- provenance: ").removesuffix(" -->"))["command"].endswith("'-->'")
    again = write_markdown(tmp_path / "t.md", written, "c")  # a re-render replaces the line, never stacks them
    assert again.count("<!-- provenance: ") == 1
    assert provenance_comment({"a": ">"}) == '<!-- provenance: {"a": "\\u003e"} -->'


def test_interval_formats() -> None:
    assert mean_std([1.0, 2.0, 3.0]) == "2.00 ± 1.00"
    assert mean_std([4.0], digits=1) == "4.0"
    assert mean_std([], single="-") == "-"
    # t(0.975, 2) = 4.3027; half-width 4.3027 * 1 / sqrt(3) = 2.484
    assert mean_interval([1.0, 2.0, 3.0], digits=3) == "2.000 ± 2.484"
    assert mean_interval([5.0]) == "5.0"


@pytest.mark.parametrize(
    ("name", "topic", "page", "args"), [("fpga-schedule", "fpga", "schedule.md", []), ("reasoner", "reasoner", "results.md", [])]
)
def test_report_only_rerenders_the_committed_page_from_its_saved_data(
    tmp_path: Path, name: str, topic: str, page: str, args: list[str]
) -> None:
    shutil.copytree(ROOT / "docs" / "bench" / topic, tmp_path / topic)
    assert main([name, "--out", str(tmp_path / topic), "--report-only", *args]) == 0
    rendered = (tmp_path / topic / page).read_text()
    assert rendered.startswith("<!-- provenance: ")
    assert strip_provenance(rendered) == strip_provenance((ROOT / "docs" / "bench" / topic / page).read_text())


def test_the_transfer_goal_compares_seeded_30_with_unseeded_100_query_medians() -> None:
    from coevo.figures.few_evals import _transfer_goal

    def rows(role: str, budget: int, values: list[float]) -> list[dict[str, object]]:
        return [{"role": role, "budget": budget, "seed": s, "hv": v} for s, v in enumerate(values)]

    saved = rows("no transfer", 100, [0.90, 0.95, 0.99]) + rows("evaluations", 30, [0.96, 0.94, 0.99])
    saved += rows("both", 30, [0.93, 0.90, 0.99])
    line = _transfer_goal(saved)
    # medians: unseeded at 100 is 0.95; evaluations at 30 is 0.96 (met); both at 30 is 0.93 (0.02 short)
    assert "without it (0.9500, median)" in line
    assert "`evaluations` 0.9600 (met)" in line and "`both` 0.9300 (misses by 0.0200)" in line
