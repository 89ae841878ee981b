"""Loading plug-ins: built-in tables, Python entry points, and ``module:attr`` or ``path/file.py:attr`` references.

Problems and proposers are plug-in families: coevo's own are listed in one table each, an
installed package adds its own through an entry-point group (``coevo.problems``,
``coevo.proposers`` in its ``pyproject.toml``), and a user names one directly by reference.
Every failure to load says, in one line, what was asked for and what went wrong.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from typing import Any

from coevo.search.errors import UserInputError

# Before the packages were installed under ``coevo`` (issue 27) they were top-level modules, and
# studies created then store references such as ``search.nb201.problem:NB201Problem``.
_OLD_TOP_LEVEL = ("agent", "tools", "knowledge", "search", "sim", "prompts")


def _import_module(target: str) -> Any:
    """``importlib.import_module(target)``, reading a pre-rename name (``search.x``) as ``coevo.search.x``.

    Where coevo has no such module (a user's own ``tools.mine``), ``target`` is imported as it is.
    """
    if target.split(".", 1)[0] in _OLD_TOP_LEVEL:
        try:
            return importlib.import_module(f"coevo.{target}")
        except ModuleNotFoundError as exc:
            if not (exc.name and f"coevo.{target}".startswith(exc.name)):
                raise
    return importlib.import_module(target)


def is_reference(text: str) -> bool:
    """Whether ``text`` names an attribute by reference (``module:attr`` or ``path/file.py:attr``)."""
    return ":" in text


def load_reference(ref: str, *, what: str) -> Any:
    """The object ``ref`` names: ``package.module:Attr.attr`` or ``path/to/file.py:Attr``.

    Args:
        ref: the reference.
        what: what is being loaded, for messages (e.g. ``problem``).

    Raises:
        UserInputError: malformed reference, a file or module that does not exist or fails to
            import (its error is quoted), or no such attribute.
    """
    target, _, attr = ref.rpartition(":")
    if not target or not attr:
        raise UserInputError(f"{what} {ref!r}: give module:Class or path/to/file.py:Class")
    if target.endswith(".py"):
        module = _import_file(Path(target), what=what, ref=ref)
    else:
        try:
            module = _import_module(target)
        except ModuleNotFoundError as exc:
            if exc.name and target.startswith(exc.name):
                raise UserInputError(f"{what} {ref!r}: no module {target!r} (is its package installed, or on PYTHONPATH?)") from None
            raise UserInputError(f"{what} {ref!r}: module {target!r} failed to import: {type(exc).__name__}: {exc}") from None
        except Exception as exc:  # the user's module raised while importing
            raise UserInputError(f"{what} {ref!r}: module {target!r} failed to import: {type(exc).__name__}: {exc}") from None
    value: Any = module
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            found = sorted(n for n in dir(module) if not n.startswith("_"))[:12]
            raise UserInputError(f"{what} {ref!r}: {target} has no {attr!r} (it defines: {', '.join(found) or 'nothing'})") from None
    return value


def _import_file(path: Path, *, what: str, ref: str) -> Any:
    if not path.is_file():
        raise UserInputError(f"{what} {ref!r}: no file {str(path)!r}")
    resolved = path.resolve()
    # one module per file, named after its path so two files of the same name do not collide
    name = "coevo_user_" + hashlib.sha1(str(resolved).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise UserInputError(f"{what} {ref!r}: {str(path)!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        line = _line_in(exc, resolved)
        raise UserInputError(f"{what} {ref!r}: {path} failed to import{line}: {type(exc).__name__}: {exc}") from None
    return module


def _line_in(exc: BaseException, path: Path) -> str:
    """`` (line N)`` of the deepest frame of ``exc`` in ``path``, when there is one."""
    tb, line = exc.__traceback__, None
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename) == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    if line is None and isinstance(exc, SyntaxError) and exc.lineno:
        line = exc.lineno
    return f" (line {line})" if line else ""


def entry_points(group: str) -> dict[str, importlib.metadata.EntryPoint]:
    """Installed entry points of ``group``, by name."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=group)}


def load_entry_point(ep: importlib.metadata.EntryPoint, *, what: str) -> Any:
    """The object an entry point names (its import errors as one line)."""
    try:
        return ep.load()
    except Exception as exc:
        raise UserInputError(f"{what} {ep.name!r} (entry point {ep.value}) failed to load: {type(exc).__name__}: {exc}") from None
