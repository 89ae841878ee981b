"""Lazy package exports: a package re-exports its submodules' names without importing them at start-up.

A package's ``__init__`` keeps its ``from coevo.sim.x.y import a, b`` lines, but inside
``if TYPE_CHECKING:`` (so type checkers and readers still see where each name comes from), and ends with::

    __getattr__ = lazy_exports(__name__, __file__)

The first time ``coevo.sim.x.a`` is read, the submodule that the ``TYPE_CHECKING`` block names
for ``a`` is imported, and ``a`` is returned and kept in the package. Listing coevo's problems or
tools then costs no torch, OR-Tools or pandas import; using a name costs exactly what it did.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _type_checking_imports(source: str, package: str) -> dict[str, tuple[str, str]]:
    """``exported name -> (module, name there)`` from the ``from M import ...`` lines under ``if TYPE_CHECKING:``."""
    found: dict[str, tuple[str, str]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.module:
                module = stmt.module if stmt.level == 0 else importlib.util.resolve_name("." * stmt.level + stmt.module, package)
                for alias in stmt.names:
                    found[alias.asname or alias.name] = (module, alias.name)
    return found


def lazy_exports(package: str, init_file: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``package`` that imports each re-exported name on first use."""
    table: dict[str, tuple[str, str]] | None = None

    def exports() -> dict[str, tuple[str, str]]:
        nonlocal table
        if table is None:  # read once, on the first lazy name: parsing the package's own small file
            table = _type_checking_imports(Path(init_file).read_text(encoding="utf-8"), package)
        return table

    class _Package(types.ModuleType):
        """Keeps an exported name that is also a submodule's name (``sim.freeze.train``) bound to the export.

        Importing a submodule binds its name in the package; the eager package re-bound it to the
        function it imported, so the lazy one does the same (the submodule stays in ``sys.modules``).
        """

        def __setattr__(self, name: str, value: Any) -> None:
            if isinstance(value, types.ModuleType) and value.__name__ == f"{package}.{name}" and name in exports():
                module, attr = exports()[name]
                if module != value.__name__:
                    return  # another submodule defines it: __getattr__ finds it on first use
                value = getattr(value, attr)
            super().__setattr__(name, value)

    sys.modules[package].__class__ = _Package

    def __getattr__(name: str) -> Any:
        table = exports()
        if name in table:
            module, attr = table[name]
            value = getattr(importlib.import_module(module), attr)
        elif not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f"{package}.{name}")  # a submodule the eager package used to import
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)  # later reads skip this function
        return value

    return __getattr__
