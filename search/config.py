"""One search's configuration, validated in one place: problem, proposer, reasoner, budget, seed, storage.

Every way of starting a search builds a :class:`SearchConfig` and hands it down: the CLI's
``search``, ``worker`` and ``bench`` commands (from their flags), ``coevo.optimize`` (from its
keywords), the ``search.run`` and ``search.start`` tools (from their arguments), and a worker
joining a study (from what the study stores, :meth:`SearchConfig.from_stored`). Each default
is declared here once, and a bad value fails here, naming the field (or, for the CLI, the
flag: :data:`FLAGS`) and what it may be.

The reasoner part is data only (:class:`ReasonerConfig`): search/ never imports agent/, where
reasoners are built from it (:func:`coevo.agent.reasoners.build_reasoner`). The engine's
options (:class:`EngineOptions`) default to None, which leaves the proposer's own default.

Example:
    >>> config = SearchConfig(budget=5, seed=1)
    >>> config.proposer, config.problem, config.budget
    ('pelnas', 'nb201', 5)
    >>> SearchConfig.create(budget=-1)
    Traceback (most recent call last):
    ...
    coevo.sim.errors.UserInputError: budget must be a number of evaluations, 0 or more (0: the front the free information predicts), got -1
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from coevo.search.errors import UserInputError
from coevo.search.problem import Problem
from coevo.search.proposers import Proposer, get_proposer, proposer_factory, takes_reasoner
from coevo.search.runner import MAX_SEED, budget_problem, seed_problem
from coevo.search.storage import DEFAULT_STORAGE

if TYPE_CHECKING:
    from coevo.search.runner import SearchResult
    from coevo.search.study import StoredSearch
    from coevo.search.workers import Progress, WorkerSettings

DEFAULT_PROBLEM = "nb201"
DEFAULT_PROPOSER = "pelnas"
"""The headline engine (co-evolution), the default of the CLI, the API and the tools alike."""
DEFAULT_LLM_TIMEOUT_S = 60.0
"""The deadline of one LLM request, in seconds: connect and every read of the reply together
(a reply still arriving then is abandoned and retried), for every LLM client coevo builds
(reasoners and chat)."""
LLM_TIMEOUT_HELP = "seconds one LLM request may take in all, connect and every read of the reply (a late reply is abandoned and retried)"
"""The help of ``--llm-timeout`` (``coevo search`` and ``coevo chat``) and of the reasoner's ``timeout_s``."""

ReasonerKind = Literal["auto", "offline", "llm"]
Screen = Literal["on", "llm", "off"]
KbFromUse = Literal["both", "evaluations", "heuristics"]
KB_FROM_USES: tuple[str, ...] = get_args(KbFromUse)
DEFAULT_KB_FROM_USE: KbFromUse = "evaluations"
"""What ``--kb-from`` seeds: the earlier study's paid evaluations (the predictor's labels or prior), its heuristics
(imported into the knowledge base), or both. The evaluations alone by default: in the issue-29 transfer figure
(docs/bench/nb201/issue29-few-evals.md) importing the heuristics as well changed the HV by -0.0006 to +0.0002 at 30 and
100 queries (intervals around 0) and the heuristics alone bought nothing over no transfer, so the simpler one is the
default. A source with no paid evaluations (an export file) seeds its heuristics when the flag is not given
(:func:`knowledge.kb_from.check_kb_from`)."""

FLAGS: dict[str, str] = {
    "problem": "--problem",
    "options": "--options",
    "proposer": "--proposer",
    "budget": "--budget",
    "seed": "--seed",
    "storage": "--storage",
    "study": "--study",
    "eval_timeout_s": "--eval-timeout",
    "reasoner.kind": "--reasoner",
    "reasoner.base_url": "--llm-base-url",
    "reasoner.model": "--llm-model",
    "reasoner.api_key": "--llm-api-key",
    "reasoner.price_per_mtok": "--llm-price",
    "reasoner.timeout_s": "--llm-timeout",
    "reasoner.tools": "--tools",
    "engine.round_size": "--round-size",
    "engine.kb_tokens": "--kb-tokens",
    "engine.kb_from": "--kb-from",
    "engine.kb_from_use": "--kb-from-use",
    "engine.screen": "--screen",
}
"""The ``coevo search`` flag of each field (dotted for nested ones): error messages of the CLI
name the flag, and :meth:`SearchConfig.to_argv` writes the command line of a background search."""


class FieldProblem(ValueError):
    """A check across fields, naming the field to blame (its message reads after the field's name)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class _Config(BaseModel):
    """What the three configurations share: keyword-only, frozen, no unknown field, one builder that says what is wrong."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: ClassVar[str] = ""
    """How fields of this model are named in :data:`FLAGS` and messages (``reasoner.``, ``engine.``)."""

    @classmethod
    def create(cls, *, names: Mapping[str, str] | None = None, **values: Any) -> Self:
        """Validate ``values`` (None ones are left at their defaults) into a configuration.

        Args:
            names: what to call each field in messages (:data:`FLAGS` for the CLI); the field's
                own (dotted) name when absent.
            values: the fields (nested ones as mappings or models).

        Raises:
            UserInputError: one line naming each wrong field and what it may be.
        """
        try:
            return cls.model_validate({k: v for k, v in values.items() if v is not None})
        except ValidationError as exc:
            raise UserInputError(config_error(exc, names or {}, prefix=cls.path)) from None


class ReasonerConfig(_Config):
    """Settings of the reasoner of a proposer that takes one (the co-evolution engine); data only.

    Flags come first and the environment second (``COEVO_LLM_BASE_URL``, ``COEVO_LLM_MODEL``,
    ``OPENAI_API_KEY``): the reasoner's builder reads the environment for what is None here.
    This is also the form a study stores (:meth:`Reasoner.config`), without the key.
    """

    path: ClassVar[str] = "reasoner."

    kind: ReasonerKind = Field(
        default="auto", description="auto: the LLM when an endpoint and a model are configured, else offline (no LLM)"
    )
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint; 'simulated' serves simulated reasoners")
    model: str | None = Field(default=None, description="model name, or several with weights (a:3,b:1)")
    api_key: str | None = Field(default=None, repr=False, exclude=True, description="API key; in memory only, never stored or printed")
    price_per_mtok: tuple[float, float] | None = Field(default=None, description="input and output USD per million tokens")
    timeout_s: float = Field(default=DEFAULT_LLM_TIMEOUT_S, description=LLM_TIMEOUT_HELP)
    tools: bool = Field(default=True, description="let the LLM call the round's cheap read-only tools while proposing")
    guided: bool = Field(default=True, description="offline reasoner: guided by its heuristics (False: an ablation)")

    @field_validator("timeout_s")
    @classmethod
    def _positive_timeout(cls, value: float) -> float:
        if not value > 0:
            raise ValueError(f"must be a positive number of seconds, got {value}")
        return value

    @field_validator("price_per_mtok")
    @classmethod
    def _non_negative_price(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and min(value) < 0:
            raise ValueError(f"must be two non-negative USD amounts (input,output), got {value[0]},{value[1]}")
        return value

    def settings(self) -> dict[str, Any]:
        """What a proposer's factory takes as ``reasoner=``: every field, the key included (in memory only)."""
        return {**self.model_dump(), "api_key": self.api_key}


class EngineOptions(_Config):
    """Options of the proposers that take a reasoner (the co-evolution engine); None leaves the proposer's default."""

    path: ClassVar[str] = "engine."

    round_size: int | None = Field(default=None, description="proposals per co-evolution round")
    kb_tokens: int | None = Field(default=None, description="token budget of the heuristics in each request")
    kb_from: str | None = Field(default=None, description="seed the knowledge base from another study or an export file")
    kb_from_use: KbFromUse | None = Field(
        default=None, description="what --kb-from seeds: evaluations (the predictor), heuristics (the knowledge base) or both"
    )
    screen: Screen | None = Field(default=None, description="how the engine screens an LLM's candidates: on, llm or off")

    @field_validator("round_size", "kb_tokens")
    @classmethod
    def _at_least_one(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"must be at least 1, got {value}")
        return value

    def given(self) -> dict[str, Any]:
        """The options set (not None), as the proposer's keywords."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class SearchConfig(_Config):
    """One search: what to search, with what, for how long, and where its study lives.

    ``problem`` and ``proposer`` are names (or references) or, from Python, instances.
    ``reasoner`` and ``engine`` apply to proposers that take a reasoner only; ``reasoner=None``
    leaves the proposer's own (offline). ``proposer_options`` are any further keywords of the
    proposer's factory (a joining worker passes what the study stored).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    problem: str | Problem = Field(
        default=DEFAULT_PROBLEM, description="problem name, module:Class or path/to/file.py:Class, or an instance"
    )
    options: dict[str, Any] = Field(default_factory=dict, description="the problem's options (when it is given by name)")
    proposer: str | Proposer = Field(default=DEFAULT_PROPOSER, description="proposer name (pelnas, tpe, ...) or an instance")
    budget: int = Field(default=100, description="evaluations: paid ones of the expensive objective (zero-cost: on an estimate, none paid)")
    seed: int = Field(default=0, description=f"random seed, 0 to {MAX_SEED}")
    storage: str | None = Field(default=None, description=f"Optuna storage URL; None: {DEFAULT_STORAGE}")
    study: str | None = Field(default=None, description="study name; None: built from the problem, proposer and seed")
    eval_timeout_s: float | None = Field(
        default=None,
        description=f"seconds one evaluation may take before its trial fails as timed out (inf: no limit); None: the problem's "
        f"own (Problem.eval_timeout_s, {Problem.eval_timeout_s:g} s unless the problem declares another)",
    )
    reasoner: ReasonerConfig | None = Field(default=None, description="the reasoner of proposers that take one; None: the proposer's own")
    engine: EngineOptions = Field(default_factory=EngineOptions, description="the co-evolution engine's options")
    proposer_options: dict[str, Any] = Field(default_factory=dict, description="further keywords of the proposer's factory")

    @field_validator("budget")
    @classmethod
    def _positive_budget(cls, value: int) -> int:
        if (problem := budget_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @field_validator("eval_timeout_s")
    @classmethod
    def _positive_eval_timeout(cls, value: float | None) -> float | None:
        if value is not None and not value > 0:
            raise ValueError(f"must be a positive number of seconds (inf: no limit), got {value}")
        return value

    @field_validator("seed")
    @classmethod
    def _seed_range(cls, value: int) -> int:
        if (problem := seed_problem(value)) is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> SearchConfig:
        if isinstance(self.problem, Problem):
            if self.options:
                raise FieldProblem("options", "go to the problem's constructor when you pass a problem instance")
        else:
            from coevo.search.problems import problem_class

            problem_class(self.problem).validate_options(self.options)  # cheap: nothing is built yet
        if self.engine.kb_from_use and not self.engine.kb_from:
            raise FieldProblem("engine.kb_from_use", "says what --kb-from seeds; give --kb-from STUDY_OR_FILE too")
        if isinstance(self.proposer, Proposer):
            return self
        proposer_factory(self.proposer)  # an unknown name fails here, listing the known ones
        if not takes_reasoner(self.proposer):
            if self.engine.kb_from:
                raise FieldProblem("engine.kb_from", f"needs a pelnas proposer (a knowledge base); {self.proposer} has none")
            if self.engine.kb_from_use:
                raise FieldProblem("engine.kb_from_use", f"needs a pelnas proposer; {self.proposer} has no --kb-from")
            if self.reasoner is not None or "reasoner" in self.proposer_options:
                raise FieldProblem("reasoner", f"is not for proposer {self.proposer!r}: it takes no reasoner")
        return self

    # ------------------------------------------------------------ building

    @classmethod
    def from_stored(cls, stored: StoredSearch, *, names: Mapping[str, str] | None = None, **values: Any) -> SearchConfig:
        """The configuration of a search read back from its study (:func:`search.study.load_search`).

        Its problem, proposer, seed and budget are the study's; what the proposer stored
        (:meth:`Proposer.options`) becomes ``proposer_options`` (the reasoner's settings go to
        ``reasoner``, checked by :class:`ReasonerConfig`). ``values`` set the rest (storage, study,
        a worker's own ``eval_timeout_s``); ``names`` as in :meth:`create`.
        Studies made before some option existed store fewer keys: the proposer's defaults fill them.
        """
        options = dict(stored.proposer_options)
        reasoner = options.pop("reasoner", None)
        fields: dict[str, Any] = {"problem": stored.problem, "proposer": stored.proposer, "seed": stored.seed}
        fields |= {"budget": stored.budget or None, "reasoner": reasoner, "proposer_options": options}  # a study always stores a budget
        return cls.create(names=names, **(fields | values))

    def make_problem(self) -> Problem:
        """The problem: the instance given, or built from its name and options."""
        if isinstance(self.problem, Problem):
            return self.problem
        from coevo.search.problems import make_problem

        return make_problem(self.problem, self.options, storage=self.storage)

    def takes_reasoner(self) -> bool:
        """Whether the proposer is driven by a reasoner (the co-evolution engine)."""
        return not isinstance(self.proposer, Proposer) and takes_reasoner(self.proposer)

    def make_proposer(self, reasoner: object | None = None) -> Proposer:
        """The proposer, built with its options; ``reasoner``: a built one (an ``agent.reasoners`` object, which this layer
        does not import; else its settings go to the factory)."""
        if isinstance(self.proposer, Proposer):
            return self.proposer
        options = dict(self.proposer_options)
        if self.takes_reasoner():
            options.update(self.engine.given())
            if reasoner is not None:
                options["reasoner"] = reasoner
            elif self.reasoner is not None:
                options["reasoner"] = self.reasoner.settings()
        return get_proposer(self.proposer, options)

    def run(
        self,
        *,
        problem: Problem | None = None,
        proposer: Proposer | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        settings: WorkerSettings | None = None,
        on_open: Callable[[str], None] | None = None,
        started: float | None = None,
    ) -> SearchResult:
        """Run (or resume) the search to its budget (:func:`search.runner.run_search`); returns its :class:`SearchResult`.

        ``problem`` and ``proposer``: already built from this configuration (else built here).
        ``started``: the :func:`time.perf_counter` reading the result's ``wall_s`` counts from
        (the command's start; None: this call's).
        """
        from coevo.search.runner import run_search

        return run_search(
            problem if problem is not None else self.make_problem(),
            proposer if proposer is not None else self.make_proposer(),
            budget=self.budget,
            seed=self.seed,
            storage=self.storage,
            study_name=self.study,
            on_progress=on_progress,
            settings=settings,
            on_open=on_open,
            eval_timeout_s=self.eval_timeout_s,
            started=started,
        )

    def to_argv(self) -> list[str]:
        """The ``coevo search`` flags of this configuration (the API key never: it goes through the environment).

        Raises:
            UserInputError: the problem or proposer is an instance, or the proposer has options
                no flag carries.
        """
        if isinstance(self.problem, Problem) or isinstance(self.proposer, Proposer):
            raise UserInputError("a search of a problem or proposer instance cannot run as a command; give names")
        if self.proposer_options:
            raise UserInputError(f"proposer options {', '.join(self.proposer_options)} have no flag; use the Python API")
        f = FLAGS  # every flag's name from the one table
        argv = [f["problem"], self.problem, f["proposer"], self.proposer, f["budget"], str(self.budget), f["seed"], str(self.seed)]
        argv += [f["options"], json.dumps(self.options)]
        argv += _flags("", {"storage": self.storage, "study": self.study, "eval_timeout_s": self.eval_timeout_s})
        if self.reasoner is None and self.takes_reasoner():
            argv += [f["reasoner.kind"], "offline"]  # None is the proposer's own reasoner, offline; the command's default is auto
        elif self.reasoner is not None:
            r = self.reasoner
            argv += [
                f["reasoner.kind"],
                r.kind,
                f["reasoner.timeout_s"],
                repr(r.timeout_s),
                f["reasoner.tools"],
                "on" if r.tools else "off",
            ]
            argv += _flags("reasoner.", {"base_url": r.base_url, "model": r.model})
            if r.price_per_mtok is not None:
                argv += [f["reasoner.price_per_mtok"], ",".join(repr(p) for p in r.price_per_mtok)]
        return argv + _flags("engine.", self.engine.given())


def default(field: str) -> Any:
    """The default of :class:`SearchConfig` field ``field`` (for signatures and flag help that show it)."""
    return SearchConfig.model_fields[field].get_default(call_default_factory=True)


def _flags(prefix: str, values: Mapping[str, Any]) -> list[str]:
    """``[flag, value, ...]`` of the fields set (not None)."""
    argv: list[str] = []
    for key, value in values.items():
        if value is not None:
            argv += [FLAGS[prefix + key], str(value)]
    return argv


def config_error(exc: ValidationError, names: Mapping[str, str], *, prefix: str = "") -> str:
    """A validation error as one line: each wrong field under its name, what it may be, what was given.

    ``prefix`` is the dotted path of the model validated (``reasoner.`` for a :class:`ReasonerConfig` alone).
    """
    parts = []
    for e in exc.errors():
        where = prefix + ".".join(str(x) for x in e["loc"])
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, UserInputError):
            parts.append(str(cause))  # a registry's own message (unknown problem or proposer, a problem option)
            continue
        if isinstance(cause, FieldProblem):
            where = prefix + cause.field
        name = names.get(where, where) or "(configuration)"
        msg = str(e["msg"]).removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            parent = where.rsplit(".", 1)[0] if "." in where else ""
            parts.append(f"no setting {name!r} (settings: {', '.join(_fields(parent))})")
        elif e["type"] == "value_error":
            parts.append(f"{name} {msg}")
        else:
            parts.append(f"{name}: {msg[0].lower()}{msg[1:]}, got {e['input']!r}")
    return "; ".join(parts)


def _fields(parent: str) -> list[str]:
    nested: dict[str, type[_Config]] = {"reasoner": ReasonerConfig, "engine": EngineOptions}
    return list(nested.get(parent, SearchConfig).model_fields)


__all__ = [
    "DEFAULT_LLM_TIMEOUT_S",
    "DEFAULT_PROBLEM",
    "DEFAULT_PROPOSER",
    "FLAGS",
    "LLM_TIMEOUT_HELP",
    "EngineOptions",
    "ReasonerConfig",
    "ReasonerKind",
    "Screen",
    "SearchConfig",
    "config_error",
    "default",
]
