"""Loading plug-ins: built-in tables, Python entry points, and ``module:attr`` or ``path/file.py:attr`` references.

Problems and proposers are plug-in families: coevo's own are listed in one table each, an
installed package adds its own through an entry-point group (``coevo.problems``,
``coevo.proposers`` in its ``pyproject.toml``), and a user names one directly by reference.
Every failure to load says, in one line, what was asked for and what went wrong.

:func:`parse_reference` is the one reading of a reference: the loader imports exactly what it
accepts, and the tools ask before a model's call that names one (``tools._base.names_code``), so
the two can never disagree about whether a value is code. A user's file or module is imported
with a time limit (:data:`DEFAULT_IMPORT_TIME_LIMIT_S`, ``COEVO_IMPORT_TIME_LIMIT_S``): a file that
loops or waits at import is reported in one line instead of hanging the command, and one that
calls ``sys.exit()`` or raises another ``BaseException`` at import is reported in one line too.
"""

from __future__ import annotations

import contextvars
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from coevo.search.errors import UserInputError

# Before the packages were installed under ``coevo`` (issue 27) they were top-level modules, and
# studies created then store references such as ``search.nb201.problem:NB201Problem``.
_OLD_TOP_LEVEL = ("agent", "tools", "knowledge", "search", "sim", "prompts")

DEFAULT_IMPORT_TIME_LIMIT_S = 30.0
"""How long a user's problem or model file (or module) may take to import before the load gives up."""
ENV_IMPORT_TIME_LIMIT = "COEVO_IMPORT_TIME_LIMIT_S"
"""Environment variable overriding :data:`DEFAULT_IMPORT_TIME_LIMIT_S` (seconds; 0 turns the limit off)."""

T = TypeVar("T")


class ImportStoppedError(UserInputError):
    """A user's file or module did not finish importing in time, or left it by ``SystemExit`` or another ``BaseException``."""


_STUCK: dict[str, float] = {}
"""Files and modules whose import ran past the time limit in this process (they may still be running): never retried."""


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


@dataclass(frozen=True)
class Reference:
    """A parsed reference: ``target`` (a dotted module name, or a path ending in ``.py``) and ``attr`` (dotted names in it)."""

    target: str
    attr: str

    @property
    def is_file(self) -> bool:
        """Whether the target is a Python file (else a module to import)."""
        return self.target.endswith(".py")


def parse_reference(text: Any) -> Reference | None:
    """The reference ``text`` names, or None when the loader would import nothing for it.

    The last ``:`` splits the target from the attribute, whatever comes before it (a path may
    hold ``:`` or ``//``: ``x://evil.py:make`` is the file ``x:/evil.py``). The attribute is
    dotted Python names; the target is a path ending in ``.py`` or a dotted module name. Anything
    else (a URL such as ``postgresql://host/db``, ``a:b c``) is not a reference and is never imported.

    >>> parse_reference("path/to/file.py:Space"), parse_reference("pkg.mod:Cls.inner")
    (Reference(target='path/to/file.py', attr='Space'), Reference(target='pkg.mod', attr='Cls.inner'))
    >>> parse_reference("x://evil.py:make"), parse_reference("postgresql://u@h:5432/db"), parse_reference("nb201")
    (Reference(target='x://evil.py', attr='make'), None, None)
    """
    if not isinstance(text, str):
        return None
    target, sep, attr = text.rpartition(":")
    if not sep or not target or not all(part.isidentifier() for part in attr.split(".")):
        return None
    if target.endswith(".py") or all(part.isidentifier() for part in target.split(".")):
        return Reference(target, attr)
    return None


def is_reference(text: str) -> bool:
    """Whether ``text`` is meant as a reference (it holds ``:``); :func:`load_reference` says what is wrong with a malformed one."""
    return ":" in text


def import_time_limit() -> float | None:
    """Seconds a user's file or module may take to import (``COEVO_IMPORT_TIME_LIMIT_S``, else the default); None: no limit.

    Raises:
        UserInputError: the environment variable is not a number.
    """
    raw = os.environ.get(ENV_IMPORT_TIME_LIMIT, "").strip()
    if not raw:
        return DEFAULT_IMPORT_TIME_LIMIT_S
    try:
        limit = float(raw)
    except ValueError:
        raise UserInputError(f"{ENV_IMPORT_TIME_LIMIT}={raw!r} is not a number of seconds (0 turns the import time limit off)") from None
    return limit if limit > 0 else None


def _limited(run: Callable[[], T], limit: float | None, *, key: str, shown: str, prefix: str) -> T:
    """``run()`` (an import of user code) under the time limit, its ``BaseException`` other than Ctrl-C as one line.

    The import runs in a daemon thread while this one waits: a thread cannot be stopped, so a
    file that never finishes is left running (in a command, until the process exits) and is not
    imported again in this process. Ordinary exceptions are raised here as they were raised there.

    Raises:
        ImportStoppedError: the import ran past the limit (now or before), or raised ``SystemExit``
            or another ``BaseException`` that is neither an ``Exception`` nor Ctrl-C (one line, naming it).
    """
    if key in _STUCK:
        raise ImportStoppedError(
            f"{prefix}: {shown} did not finish importing in {_STUCK[key]:g} s earlier in this process; fix it and rerun"
        )
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append(("value", run()))
        except BaseException as exc:  # every way out of the user's code is reported; none escapes the thread
            outcome.append(("raised", exc))

    if limit is None:
        target()
    else:
        context = contextvars.copy_context()  # the caller's context (the tool policy's workspace) holds in the thread too
        thread = threading.Thread(target=context.run, args=(target,), name=f"coevo-import {shown}", daemon=True)
        thread.start()
        thread.join(limit)
        if thread.is_alive():
            _STUCK[key] = limit
            raise ImportStoppedError(
                f"{prefix}: {shown} did not finish importing in {limit:g} s (a loop or a wait at import time?); "
                f"fix it, or set {ENV_IMPORT_TIME_LIMIT} to allow longer"
            )
    kind, value = outcome[0]
    if kind == "value":
        return value
    if isinstance(value, Exception | KeyboardInterrupt):
        raise value
    if isinstance(value, SystemExit):
        raise ImportStoppedError(
            f"{prefix}: {shown} called sys.exit({value.code!r}) while importing; a file coevo loads must not exit"
        ) from None
    detail = f": {value}" if str(value) else ""
    raise ImportStoppedError(f"{prefix}: {shown} raised {type(value).__name__} while importing{detail}") from None


def load_reference(ref: str, *, what: str) -> Any:
    """The object ``ref`` names: ``package.module:Attr.attr`` or ``path/to/file.py:Attr``.

    Args:
        ref: the reference.
        what: what is being loaded, for messages (e.g. ``problem``).

    Raises:
        UserInputError: malformed reference, a file or module that does not exist or fails to
            import (its error is quoted), or no such attribute.
    """
    parsed = parse_reference(ref)
    if parsed is None:
        raise UserInputError(f"{what} {ref!r}: give module:Class or path/to/file.py:Class")
    target, attr = parsed.target, parsed.attr
    if parsed.is_file:
        module = _import_file(Path(target), what=what, ref=ref)
    else:
        try:
            key = f"module {target}"
            if (own_module(target) or target in sys.modules) and key not in _STUCK:
                module = _import_module(target)  # coevo's own modules, or one already imported: no user code runs
            else:
                limit = import_time_limit()
                module = _limited(lambda: _import_module(target), limit, key=key, shown=f"module {target!r}", prefix=f"{what} {ref!r}")
        except ImportStoppedError:
            raise
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
            found = _defined_names(module)[:12]
            raise UserInputError(f"{what} {ref!r}: {target} has no {attr!r} (it defines: {', '.join(found) or 'nothing'})") from None
    return value


def _defined_names(module: Any) -> list[str]:
    """The public classes and functions ``module`` defines itself (not what it imports), sorted; else every public name."""
    names = sorted(n for n in dir(module) if not n.startswith("_"))
    own = [n for n in names if getattr(getattr(module, n), "__module__", None) == module.__name__]
    return own or names


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
    limit = import_time_limit()
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        _limited(lambda: loader.exec_module(module), limit, key=f"file {resolved}", shown=str(path), prefix=f"{what} {ref!r}")
    except ImportStoppedError:
        sys.modules.pop(name, None)  # a file still importing (or stopped) is never handed out half-made
        raise
    except Exception as exc:
        sys.modules.pop(name, None)
        line = _line_in(exc, resolved)
        raise UserInputError(f"{what} {ref!r}: {path} failed to import{line}: {type(exc).__name__}: {exc}") from None
    return module


def own_module(target: str) -> bool:
    """Whether module ``target`` is one of coevo's own (``coevo.*``, or a pre-rename name of one): importing it runs no user code."""
    top = target.split(".", 1)[0]
    if top == "coevo":
        return True
    if top not in _OLD_TOP_LEVEL:
        return False
    try:
        return importlib.util.find_spec(f"coevo.{target}") is not None  # a pre-rename name of a coevo module
    except (ImportError, ValueError):
        return False


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
