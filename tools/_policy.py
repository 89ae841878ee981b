"""What a tool call may touch, by who made it: the user, or a model (the chat agent, an LLM reasoner).

Tools declare what they touch (:attr:`Tool.writes`, :attr:`Tool.reads`, :attr:`Tool.loads_code`,
:meth:`Tool.stored_code`, :attr:`Tool.long_running`, :attr:`Tool.confirm`); a :class:`CallPolicy`
handed to :func:`tools.call_tool` checks one call against those declarations, in this one place,
after the arguments are validated and before the tool runs:

* a tool's storage argument left out (or null) is the caller's own storage
  (:attr:`CallPolicy.storage`: the chat's ``--storage``), not coevo's default;
* a model's call writes files only under the workspace: every written path is resolved first
  (symlinks, ``..``), and a path outside is refused with a message naming the workspace;
* a model's call reaches only the storages the user opened: the caller's own, those the user
  allowed (``coevo chat --allow-storage URL``), an in-memory SQLite database, and SQLite files
  under the workspace, whatever the URL's scheme or form (a SQLite URI is checked on the file it
  really opens); any other is refused before anything connects to it;
* a call that asks first runs only when the policy's ``confirm`` says yes: long-running
  and data-changing tools for every caller that has a ``confirm``; code that a study the call
  names would load (its problem file) for every such caller too, since the caller named the study,
  not the code; and, for a model's call, any call whose arguments would import the user's code
  (model files, problem files). A policy without ``confirm`` lets such calls run: the user typed them.

The workspace is ``--workspace`` / ``COEVO_WORKSPACE`` when given, else the folder of the
study storage's SQLite file (``./runs/`` for the default ``sqlite:///runs/coevo.sqlite3``),
else ``./runs/``. While an admitted call runs, tools that write files create missing
folders only under that workspace (:func:`prepare_output`); elsewhere a missing folder is
an error for every caller.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy.engine
import sqlalchemy.exc

from coevo.search.errors import UserInputError
from coevo.search.storage import MEMORY, resolve_storage_url, shown_url, sqlite_path, sqlite_target
from coevo.tools._base import Tool, ToolArgs, ToolArgumentError, ToolDeclinedError

ENV_WORKSPACE = "COEVO_WORKSPACE"
"""Environment variable naming the workspace folder (``--workspace`` in ``coevo chat`` wins)."""

DEFAULT_WORKSPACE = Path("runs")

Confirm = Callable[[Tool, dict[str, Any]], bool]
"""``(tool, arguments) -> yes``: asked before a call that asks first."""

_ACTIVE: ContextVar[Path | None] = ContextVar("coevo_workspace", default=None)


DEFAULT_PORTS: dict[str, int] = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433, "oracle": 1521}
"""Server ports a URL without one connects to (two URLs that differ only in an implied port name one database)."""


class OutsideWorkspaceError(ToolArgumentError):
    """A model's call would write outside the workspace; nothing ran."""


class StorageNotAllowedError(OutsideWorkspaceError):
    """A model's call names a storage the user did not open for it; nothing connected to it."""


def storage_key(url: str) -> str:
    """What a storage URL opens, for comparing URLs: a SQLite file resolved (symlinks too), or the server URL normalised.

    A server URL loses its password and driver, gets its implied port and a sorted query: two URLs
    with the same key reach the same database as the same user.
    """
    target = sqlite_target(url)
    if isinstance(target, Path):
        return f"sqlite:{target.resolve()}"
    if target == MEMORY:
        return "sqlite::memory:"
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except (sqlalchemy.exc.ArgumentError, ValueError):
        return url
    backend = parsed.get_backend_name()
    port = parsed.port or DEFAULT_PORTS.get(backend) or ""
    query = "&".join(f"{k}={v}" for k, v in sorted((k, str(v)) for k, v in parsed.query.items()))
    return f"{backend}://{parsed.username or ''}@{(parsed.host or '').lower()}:{port}/{parsed.database or ''}?{query}"


def workspace(storage: str | None = None, configured: str | os.PathLike[str] | None = None) -> Path:
    """The workspace folder, resolved: ``configured``, else ``COEVO_WORKSPACE``, else the storage's folder, else ``./runs``.

    Args:
        storage: the study storage URL (None: the default ``sqlite:///runs/coevo.sqlite3``).
        configured: a folder given explicitly (``--workspace``).
    """
    chosen = configured or os.environ.get(ENV_WORKSPACE)
    if chosen:
        return Path(chosen).resolve()
    path = sqlite_path(resolve_storage_url(storage))
    return (path.parent if path is not None else DEFAULT_WORKSPACE).resolve()


def current_workspace() -> Path:
    """The workspace of the call running now (set by :func:`tools.call_tool` with a policy), else :func:`workspace`."""
    return _ACTIVE.get() or workspace()


def written_paths(tool: Tool, args: ToolArgs) -> dict[str, Path]:
    """Argument name -> resolved local path, for every ``writes`` argument that names a file (storages: :meth:`CallPolicy.admit`).

    Raises:
        OutsideWorkspaceError: a path holds a NUL byte (no file has such a name; nothing can be checked or written).
    """
    named = {name: value for name, kind in tool.writes.items() if kind == "file" and (value := getattr(args, name))}
    return {name: _resolved(tool, name, Path(str(value))) for name, value in named.items()}


def _resolved(tool: Tool, name: str, path: Path, error: type[OutsideWorkspaceError] = OutsideWorkspaceError) -> Path:
    """``path`` resolved (symlinks, ``..``); a NUL byte in it is the caller's mistake (``error``), not a crash of the check."""
    try:
        return path.resolve()
    except ValueError:  # embedded null byte
        raise error(f"{tool.name}: {name}={str(path)!r} holds a NUL byte, which no file name may; pass a plain path") from None


def asks_first(tool: Tool, args: ToolArgs, *, by_model: bool) -> list[str]:
    """Why this call needs the user's yes (empty: it runs without asking).

    Args:
        tool: the tool.
        args: its validated arguments.
        by_model: the call comes from a model (loading the user's code then asks too).
    """
    reasons = []
    if tool.long_running:
        reasons.append("runs for a while")
    if tool.confirm:
        reasons.append("changes stored data or starts work")
    if by_model:
        reasons += [f"loads your code {ref}" for ref in tool.user_code(args)]
    reasons += [f"loads the code its study names {ref}" for ref in tool.stored_code(args)]
    return reasons


def prepare_output(path: str | os.PathLike[str], *, create: bool = True) -> Path:
    """Make ``path``'s folder ready for writing a file: created when it lies under the workspace, else it must exist.

    ``create=False`` only checks that it could be made ready, and creates nothing: a tool checks its output path
    before long work (a bad path fails in a moment) and creates the folder once the work succeeded, so a call
    refused for its other arguments leaves no empty folder behind.

    Returns ``path`` as given.

    Raises:
        UserInputError: the folder is missing and outside the workspace (one line, with the fix).
    """
    target = Path(path)
    folder = target.resolve().parent
    if folder.is_dir():
        return target
    ws = current_workspace()
    if folder.is_relative_to(ws):
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        return target
    raise UserInputError(
        f"cannot write {str(path)!r}: folder {str(folder)!r} does not exist, and only folders under the workspace {str(ws)!r} "
        "are created; create it first or write under the workspace"
    )


@dataclass(frozen=True)
class CallPolicy:
    """Who is calling a tool and what the call may do.

    Attributes:
        by_model: a model chose this call (chat agent, LLM reasoner): writes are confined
            to ``workspace``, storages to the ones the user opened, and loading the user's
            code asks first.
        workspace: the workspace folder (resolved); required for a model's call. For the
            user's own calls it only says where missing output folders may be created.
        confirm: asked before a call that asks first; None lets such calls run (the user
            typed the call and there is no one else to ask).
        declined_hint: appended to the message of a declined call (how to allow it).
        storage: the caller's own storage: a storage argument left out (or null) is this one;
            None keeps the tools' default. A model's calls may always use it.
        allowed_storages: further storages a model's calls may use (``--allow-storage``).
    """

    by_model: bool = False
    workspace: Path | None = None
    confirm: Confirm | None = None
    declined_hint: str = ""
    storage: str | None = None
    allowed_storages: tuple[str, ...] = ()

    @classmethod
    def model(
        cls,
        workspace: Path,
        confirm: Confirm,
        *,
        declined_hint: str = "",
        storage: str | None = None,
        allowed_storages: tuple[str, ...] = (),
    ) -> CallPolicy:
        """The policy of a model's calls in ``workspace`` on ``storage`` (and ``allowed_storages``), asking ``confirm``."""
        return cls(True, workspace.resolve(), confirm, declined_hint, storage, tuple(allowed_storages))

    @classmethod
    def user(
        cls, workspace: Path | None = None, confirm: Confirm | None = None, *, declined_hint: str = "", storage: str | None = None
    ) -> CallPolicy:
        """The policy of the user's own calls (``/run``): nothing restricted; ``confirm`` asked before tools that ask first."""
        return cls(False, workspace.resolve() if workspace else None, confirm, declined_hint, storage)

    def with_defaults(self, tool: Tool, raw: dict[str, Any]) -> dict[str, Any]:
        """``raw`` arguments with the caller's storage in every storage argument left out or null."""
        if self.storage is None:
            return raw
        return {**raw, **{name: self.storage for name in tool.storage_args() if raw.get(name) is None}}

    def admit(self, tool: Tool, args: ToolArgs) -> None:
        """Check one call (validated ``args``) before it runs.

        Raises:
            OutsideWorkspaceError: a model's call writes outside the workspace
                (:class:`StorageNotAllowedError`: or names a storage it may not use).
            ToolDeclinedError: the call asks first and ``confirm`` said no.
        """
        if self.by_model:
            if self.workspace is None:
                raise ValueError("a model's call needs a workspace")
            for name, path in written_paths(tool, args).items():
                if not path.is_relative_to(self.workspace):
                    raise OutsideWorkspaceError(
                        f"{tool.name} may write only under the workspace {str(self.workspace)!r}; {name}={getattr(args, name)!r} "
                        f"resolves to {str(path)!r}. Pass a path under the workspace (the user can run other paths with /run)"
                    )
            for name in tool.storage_args():
                self._check_storage(tool, name, getattr(args, name), self.workspace)
        if self.confirm is None:
            return  # no one to ask: the user typed the call
        reasons = asks_first(tool, args, by_model=self.by_model)
        if reasons and not self.confirm(tool, args.model_dump(exclude_unset=True)):
            hint = f"; {self.declined_hint}" if self.declined_hint else ""
            raise ToolDeclinedError(f"{tool.name} did not run: it asks first ({', '.join(reasons)}) and was not confirmed{hint}")

    def _check_storage(self, tool: Tool, name: str, value: str | None, workspace: Path) -> None:
        """Refuse a storage the user did not open for the model (see the module doc)."""
        url = resolve_storage_url(value)
        target = sqlite_target(url)
        if target == MEMORY:
            return  # a database of this process alone
        if isinstance(target, Path):
            target = _resolved(tool, name, target, StorageNotAllowedError)
            if target.is_relative_to(workspace):
                return
        key = storage_key(url)
        if any(key == storage_key(resolve_storage_url(s)) for s in (self.storage, *self.allowed_storages)):
            return
        where = f" (it opens {str(target)!r})" if isinstance(target, Path) else ""
        raise StorageNotAllowedError(
            f"{tool.name}: {name}={shown_url(value)!r}{where} is not a storage this session may use: a model's calls reach only "
            f"the session's storage {shown_url(self.storage)!r}, storages the user allowed, in-memory SQLite and SQLite files under "
            f"the workspace {str(workspace)!r}. Leave {name} out to use the session's, or ask the user to start the chat with "
            f"--allow-storage {shown_url(value)}"
        )

    @contextmanager
    def active(self) -> Iterator[None]:
        """Make this policy's workspace the current one (:func:`current_workspace`) for the block."""
        token = _ACTIVE.set(self.workspace)
        try:
            yield
        finally:
            _ACTIVE.reset(token)
