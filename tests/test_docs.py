"""The docs stand on their own: what they link to and name exists in the checkout, and nothing points outside it.

Checked pages: README.md and docs/*.md. Paths into docs/bench/ are checked like any other, so a
figure page that moves without its references breaks here.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...
PLACEHOLDER = re.compile(r"[<>*{}$]|\.\.\.")  # `sim/<family>/`, `docs/bench/noc-*.png`
FORBIDDEN = ("DESIGN.md", "../shared")
"""A design document and a data folder that exist beside the team's checkouts, not in a clone."""
SKIP_DIRS = {".git", ".venv", "runs", "build", "dist", "bench-out", "report", "__pycache__", "node_modules"}
"""Folders of local output a walk over a checkout without git leaves out (git ignores them too)."""


def _prose(page: Path) -> str:
    """A page's text without its fenced code blocks (shell sessions and code are not references)."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    text = heading.strip().lower()
    text = re.sub(r"\]\([^)]*\)", "", text)  # a link's target is not part of the anchor
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    """Every heading anchor of a Markdown page, repeated headings numbered as GitHub numbers them."""
    seen: Counter[str] = Counter()
    out: set[str] = set()
    for match in HEADING.finditer(_prose(page)):
        slug = _slug(match.group(1))
        out.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return out


def _broken_link(page: Path, target: str) -> str | None:
    """Why a relative link of ``page`` does not resolve, or None when it does."""
    path, _, anchor = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    if not dest.exists():
        return f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}"
    if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
        return f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}"
    return None


def _top_level_folders() -> set[str]:
    return {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    """Every relative link (and image) points to a file that exists, and to a heading of it where one is named."""
    targets = [m.group(1) for m in LINK.finditer(_prose(page)) if not EXTERNAL.match(m.group(1))]
    broken = [why for why in (_broken_link(page, t) for t in targets) if why]
    assert not broken, f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_paths_exist(page: Path) -> None:
    """Paths the prose names in code spans (`docs/bench/...`, `search/metrics.py::name`) exist from the repository root."""
    folders = _top_level_folders()
    missing = []
    for match in CODE_SPAN.finditer(_prose(page)):
        text = match.group(1).strip()
        if " " in text or "/" not in text or PLACEHOLDER.search(text) or text.split("/", 1)[0] not in folders:
            continue  # a command, a name, or a pattern, not one path
        path = text.split("::", 1)[0].split(":", 1)[0]  # file.py::function, file.py:Class
        if not (ROOT / path).exists():
            missing.append(text)
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist:\n" + "\n".join(missing)


def test_readme_links_to_the_design() -> None:
    """The front door links to the design page (and the link check above sees the README's links at all)."""
    targets = {m.group(1).partition("#")[0] for m in LINK.finditer(_prose(ROOT / "README.md"))}
    assert "docs/design.md" in targets
    assert (ROOT / "docs" / "design.md").is_file()


def _project_files() -> list[Path]:
    """The files of the checkout: tracked and untracked but not ignored, or every file of a walk without git."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
        return [ROOT / name for name in out.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        files = []
        for folder, dirs, names in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
            files += [Path(folder) / n for n in names]
        return files


def test_nothing_points_outside_the_checkout() -> None:
    """No file outside tests/ names DESIGN.md or ../shared: a clone has neither (the design is docs/design.md)."""
    offenders = []
    for path in _project_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("tests/") or path.is_symlink() or not path.is_file():
            continue  # tests may name the data beside the checkout; coevo/<package> are links to the folders walked
        text = path.read_bytes().decode("utf-8", errors="replace")
        lines = enumerate(text.splitlines(), 1)
        offenders += [f"{rel}:{n}: {line.strip()[:120]}" for n, line in lines if any(s in line for s in FORBIDDEN)]
    assert not offenders, "files that point outside the checkout:\n" + "\n".join(offenders)


# ---- intervals quoted in the prose are the ones a figure script wrote

INTERVAL = re.compile(r"(?<![\d.])([+\-−]?)(\d+\.\d+) ± (\d+\.\d+)")
SPAN = re.compile(r"`[^`]*`")  # inline code, across lines too: an example of a command's output, not a measurement
EARLIER_RUNS = {
    ("docs/compose.md", "+0.071 ± 0.069"): "stop 39's codesign-cnn run, quoted beside the rerun that replaced it",
    ("docs/compose.md", "+0.051 ± 0.045"): "stop 39's codesign-cnn run, quoted beside the rerun that replaced it",
    ("docs/compose.md", "-0.106 ± 0.124"): "the codesign-lm run before the reconfiguration cost, quoted beside its rerun",
}
"""Intervals the prose quotes from a run whose page a later run replaced (said so where they are quoted)."""


def _intervals(text: str) -> list[tuple[str, float, float, float, float]]:
    """``(as written, value, half-width, the value's rounding, the half-width's rounding)`` of every ``a ± b``."""
    out = []
    for sign, value, half in INTERVAL.findall(text):
        v = -float(value) if sign in ("-", "−") else float(value)
        out.append((f"{sign}{value} ± {half}", v, float(half), 0.5 * 10 ** -len(value.split(".")[1]), 0.5 * 10 ** -len(half.split(".")[1])))
    return out


def test_every_interval_the_prose_quotes_is_on_a_figure_page() -> None:
    # docs/bench pages are written by the figure scripts from the data they save; an interval in a hand-written page
    # must be one of theirs (to the digits the prose keeps), so a number cannot be typed in or left behind by a rerun
    written = [(v, h) for page in (ROOT / "docs" / "bench").rglob("*.md") for _, v, h, _, _ in _intervals(page.read_text(encoding="utf-8"))]
    assert len(written) > 100  # the figure pages are there to compare against
    missing = []
    for page in PAGES:
        name = str(page.relative_to(ROOT))
        for quoted, v, h, dv, dh in _intervals(SPAN.sub("", _prose(page))):
            if (name, quoted) in EARLIER_RUNS:
                continue
            if not any(abs(v - wv) <= dv + 1e-9 and abs(h - wh) <= dh + 1e-9 for wv, wh in written):
                missing.append(f"{name}: {quoted}")
    assert not missing, (
        "intervals in the prose that no docs/bench page writes (round of a page's, or an EARLIER_RUNS entry):\n" + "\n".join(missing)
    )


def test_the_earlier_runs_are_still_quoted_where_they_are_excused() -> None:
    for (name, quoted), why in EARLIER_RUNS.items():
        assert quoted in (ROOT / name).read_text(encoding="utf-8"), f"{name} no longer quotes {quoted} ({why}): drop the entry"


# ---- ranges quoted in the prose have both ends on one figure page

RANGE = re.compile(r"(?<![\d.\w±-])([+\-−]?\d+\.\d+)(?: ?%| ?x)? ?(?:-|–| to ) ?([+\-−]?\d+\.\d+)(?![\d.])")
EARLIER_RANGES = {
    ("docs/pipeline.md", "107.8 to 96.9"): "the relayed baseline's throughput before NICs were shared, quoted beside the rerun",
    ("docs/pipeline.md", "157.4 to 133.3"): "the direct-send baseline's throughput before NICs were shared, quoted beside the rerun",
}
"""Ranges whose first end is a run a later one replaced (said so where they are quoted)."""


def _ranges(text: str) -> list[tuple[str, tuple[float, float], tuple[float, float]]]:
    """``(as written, (low end, its rounding), (high end, its rounding))`` of every ``a-b`` / ``a to b`` of decimals."""
    out = []
    for match in RANGE.finditer(text):
        ends = [(abs(float(e.replace("−", "-"))), 0.5 * 10 ** -len(e.split(".")[1])) for e in match.groups()]
        out.append((match.group(0), ends[0], ends[1]))
    return out


def _numbers(text: str) -> list[float]:
    return sorted(float(n) for n in re.findall(r"\d+\.\d+", text))


def _has(numbers: list[float], end: tuple[float, float]) -> bool:
    """Whether a number of ``numbers`` (sorted) rounds to ``end`` at the prose's precision."""
    value, rounding = end
    lo, hi = value - rounding - 1e-9, value + rounding + 1e-9
    return any(lo <= n <= hi for n in numbers[bisect.bisect_left(numbers, lo) : bisect.bisect_right(numbers, hi)])


def test_every_range_the_prose_quotes_has_both_ends_on_one_figure_page() -> None:
    # the interval check's twin for "1.07-2.39x" and "-0.03 to +0.15": both ends must be numbers one docs/bench page
    # writes (signs aside, to the prose's digits); a bound on the page's numbers, not a proof that they are its min and max
    pages = [_numbers(page.read_text(encoding="utf-8")) for page in (ROOT / "docs" / "bench").rglob("*.md")]
    missing = []
    for page in PAGES:
        name = str(page.relative_to(ROOT))
        for quoted, low, high in _ranges(SPAN.sub("", _prose(page))):
            if (name, quoted) not in EARLIER_RANGES and not any(_has(n, low) and _has(n, high) for n in pages):
                missing.append(f"{name}: {quoted}")
    assert not missing, "ranges in the prose whose ends no one docs/bench page writes (or an EARLIER_RANGES entry):\n" + "\n".join(missing)


def test_the_earlier_ranges_are_still_quoted_where_they_are_excused() -> None:
    for (name, quoted), why in EARLIER_RANGES.items():
        assert quoted in _prose(ROOT / name), f"{name} no longer quotes {quoted} ({why}): drop the entry"


def test_the_range_pattern_reads_signs_dashes_and_rounding() -> None:
    found = _ranges("1.07-2.39x, -0.03 to +0.15, 0.5 ± 0.1-ish, 3.1–4.25 %, v1.2-3, -7.0 % to +7.4 %")
    assert [q for q, _, _ in found] == ["1.07-2.39", "-0.03 to +0.15", "3.1–4.25", "-7.0 % to +7.4"]
    assert found[2][2] == (4.25, 0.005)
    assert _has([2.385, 9.0], (2.39, 0.005)) and not _has([2.38, 9.0], (2.39, 0.005))
