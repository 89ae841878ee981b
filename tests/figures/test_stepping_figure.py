"""The SteppingNet figure: bad options are one line and exit 2 before anything is written; the page re-renders from its data."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from coevo.figures._cli import main
from coevo.figures._common import strip_provenance

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--steps", "0.5", "1.5"], ["1.5", "(0, 1]"]),
        (["--steps", "0.5", "0.25"], ["strictly increasing"]),
        (["--folds", "1"], ["--folds 1", "[2, 1797]"]),
        (["--train-images", "5000"], ["--train-images 5000", "[2, 1437]"]),
    ],
)
def test_bad_options_are_one_line_exit_2_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], words: list[str]
) -> None:
    out = tmp_path / "out"
    assert main(["stepping", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(w in err for w in words)
    assert not out.exists()


@pytest.mark.parametrize(("page", "model"), [("stepping", "cnn-digits"), ("stepping/mnist5k", "cnn-mnist5k")])
def test_report_only_rerenders_the_committed_page_from_its_saved_data(tmp_path: Path, page: str, model: str) -> None:
    # stepping/mnist5k is issue 31's second task (its own run: other seeds and kinds, so its own page)
    shutil.copytree(ROOT / "docs" / "bench" / page, tmp_path / "stepping")
    (tmp_path / "stepping" / "stepping.md").unlink()
    assert main(["stepping", "--out", str(tmp_path / "stepping"), "--report-only"]) == 0
    rendered = (tmp_path / "stepping" / "stepping.md").read_text()
    committed = (ROOT / "docs" / "bench" / page / "stepping.md").read_text()
    assert f"## {model}: cross-validated test accuracy" in rendered
    # the line naming the rendering command differs by --out; the rest of the page comes from the saved files alone
    assert strip_provenance(rendered).split("\n", 3)[3] == strip_provenance(committed).split("\n", 3)[3]
    assert "Data: one run of `python -m coevo.figures stepping" in rendered
