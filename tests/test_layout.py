"""The package's import graph has no circles.

The graph is grimp's (the one import-linter checks the layers on): every ``import`` in a
module counts, those inside functions and under ``TYPE_CHECKING`` too, since a circle hidden
in a function is still a circle. A failure names each circle's modules and one import chain
round it.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import get_args

import grimp
import networkx as nx
import pytest


def import_circles(package: str) -> list[list[str]]:
    """Each set of modules of ``package`` that import one another in a circle, as one chain round it (sorted by first module)."""
    graph = grimp.build_graph(package, cache_dir=None)
    edges = nx.DiGraph()
    for module in graph.modules:
        edges.add_node(module)
        edges.add_edges_from((module, imported) for imported in graph.find_modules_directly_imported_by(module))
    circles = []
    for component in nx.strongly_connected_components(edges):
        if len(component) < 2:
            continue
        start = min(component)
        back = min(m for m in component if edges.has_edge(m, start))  # a module of the circle that imports ``start``
        circles.append([*nx.shortest_path(edges.subgraph(component), start, back), start])
    return sorted(circles)


def test_coevo_has_no_import_circles() -> None:
    circles = import_circles("coevo")
    assert not circles, f"{len(circles)} import circle(s): " + "; ".join(" -> ".join(chain) for chain in circles)


def test_a_circle_through_an_import_inside_a_function_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("from circled.high import VALUE\n")
    (package / "high.py").write_text(
        textwrap.dedent(
            """
            VALUE = 1


            def later():
                from circled import low  # hidden in a function: still a circle

                return low
            """
        )
    )
    (package / "alone.py").write_text("import circled.low\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "circled", raising=False)
    assert import_circles("circled") == [["circled.high", "circled.low", "circled.high"]]


def test_nb201_modes_named_by_reference_are_its_subclasses_for_that_mode() -> None:
    """``search.nb201.problem.MODES`` names the mode classes it may not import (they subclass ``NB201Problem``)."""
    from coevo.search.nb201.problem import MODES, NB201Options, NB201Problem
    from coevo.search.plugins import load_reference

    assert set(MODES) == set(get_args(NB201Options.model_fields["mode"].annotation)) - {"query"}
    for mode, ref in MODES.items():
        cls = load_reference(ref, what="mode")
        assert issubclass(cls, NB201Problem) and cls.mode == mode


def test_the_public_names_are_the_lazily_loaded_ones() -> None:
    """``coevo.__all__`` stays a literal (linters and type checkers read re-exports from it); it must name exactly the
    names ``coevo/__init__.py`` loads lazily, each of which loads."""
    import coevo

    assert coevo.__all__ == sorted(coevo._EXPORTS)
    assert all(getattr(coevo, name) is not None for name in coevo.__all__)
