"""What a tool call may touch, by who made it: the user, or a model (the chat agent, an LLM reasoner).

Tools declare what they touch (:attr:`Tool.writes`, :attr:`Tool.loads_code`,
:attr:`Tool.long_running`, :attr:`Tool.confirm`); a :class:`CallPolicy` handed to
:func:`tools.call_tool` checks one call against those declarations, in this one place,
after the arguments are validated and before the tool runs:

* a model's call writes only under the workspace: every written path is resolved first
  (symlinks, ``..``), and a path outside is refused with a message naming the workspace;
* a call that asks first runs only when the policy's ``confirm`` says yes: long-running
  and data-changing tools for every caller that has a ``confirm``, and, for a model's
  call, any call that would import the user's code (model files, problem files). A
  policy without ``confirm`` lets such calls run: the user typed them.

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

from coevo.search.errors import UserInputError
from coevo.search.storage import resolve_storage_url, sqlite_path
from coevo.tools._base import Tool, ToolArgs, ToolArgumentError, ToolDeclinedError

ENV_WORKSPACE = "COEVO_WORKSPACE"
"""Environment variable naming the workspace folder (``--workspace`` in ``coevo chat`` wins)."""

DEFAULT_WORKSPACE = Path("runs")

Confirm = Callable[[Tool, dict[str, Any]], bool]
"""``(tool, arguments) -> yes``: asked before a call that asks first."""

_ACTIVE: ContextVar[Path | None] = ContextVar("coevo_workspace", default=None)


class OutsideWorkspaceError(ToolArgumentError):
    """A model's call would write outside the workspace; nothing ran."""


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
    """Argument name -> resolved local path, for every ``writes`` argument that names a local file.

    A storage argument of None is the default storage's file; ``sqlite:///:memory:`` and
    server URLs (``postgresql://``) name no local file and are left out.
    """
    out: dict[str, Path] = {}
    for name, kind in tool.writes.items():
        value = getattr(args, name)
        if kind == "storage":
            path = sqlite_path(resolve_storage_url(value))
            if path is None:
                continue
        elif value is None:
            continue
        else:
            path = Path(str(value))
        out[name] = path.resolve()
    return out


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
    return reasons


def prepare_output(path: str | os.PathLike[str]) -> Path:
    """Make ``path``'s folder ready for writing a file: created when it lies under the workspace, else it must exist.

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
            to ``workspace`` and loading the user's code asks first.
        workspace: the workspace folder (resolved); required for a model's call. For the
            user's own calls it only says where missing output folders may be created.
        confirm: asked before a call that asks first; None lets such calls run (the user
            typed the call and there is no one else to ask).
        declined_hint: appended to the message of a declined call (how to allow it).
    """

    by_model: bool = False
    workspace: Path | None = None
    confirm: Confirm | None = None
    declined_hint: str = ""

    @classmethod
    def model(cls, workspace: Path, confirm: Confirm, *, declined_hint: str = "") -> CallPolicy:
        """The policy of a model's calls in ``workspace``, asking ``confirm``."""
        return cls(by_model=True, workspace=workspace.resolve(), confirm=confirm, declined_hint=declined_hint)

    @classmethod
    def user(cls, workspace: Path | None = None, confirm: Confirm | None = None, *, declined_hint: str = "") -> CallPolicy:
        """The policy of the user's own calls (``/run``): nothing restricted; ``confirm`` asked before tools that ask first."""
        return cls(by_model=False, workspace=workspace.resolve() if workspace else None, confirm=confirm, declined_hint=declined_hint)

    def admit(self, tool: Tool, args: ToolArgs) -> None:
        """Check one call (validated ``args``) before it runs.

        Raises:
            OutsideWorkspaceError: a model's call writes outside the workspace.
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
        reasons = asks_first(tool, args, by_model=self.by_model)
        if reasons and self.confirm is not None and not self.confirm(tool, args.model_dump(exclude_unset=True)):
            hint = f"; {self.declined_hint}" if self.declined_hint else ""
            raise ToolDeclinedError(f"{tool.name} did not run: it asks first ({', '.join(reasons)}) and was not confirmed{hint}")

    @contextmanager
    def active(self) -> Iterator[None]:
        """Make this policy's workspace the current one (:func:`current_workspace`) for the block."""
        token = _ACTIVE.set(self.workspace)
        try:
            yield
        finally:
            _ACTIVE.reset(token)
