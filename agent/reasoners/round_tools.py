"""The tools an LLM reasoner may call while it proposes: cheap, read-only, bounded, cached, logged.

A round offers three registry tools through the registry's one LangChain adapter
(:func:`tools.adapters.to_langchain`), bound to the round's problem, study and storage so the
model never names (or changes) them:

* ``problem.cheap_objectives``: the free objectives of designs (NB201 latency; a composed
  problem's, e.g. ``nb201-accel``'s latency, energy and area from the accelerator model), never an
  expensive one: the search's budget counts only paid evaluations. The prompt names them with
  their units (:func:`cheap_use`); a problem without any is not offered the tool;
* ``study.front``: the front found so far, from paid evaluations, with the metrics measured
  against the true front hidden (a real search does not know the true front);
* ``kb.show``: a heuristic's claim, history and evidence.

Every other tool, ``nb201.query`` (it reads accuracy) first among them, is refused with the
reason; an unknown name or malformed arguments come back as an observation the model can act
on. Calls are cached by (tool, arguments) for the round, so a model asking the same thing
twice, or in a loop, pays once; a round's calls are bounded in count and in the tokens of the
requests that carried them (:class:`ToolBudget`); past the bound every call is refused and
the model is asked to answer. Each call is logged (:attr:`RoundToolbox.log`) for the round
log and the knowledge-base report.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool

from coevo.agent.llm_client import clean_text, truncate_result
from coevo.search.problem import Evolvable, Objective, Problem
from coevo.search.storage import resolve_storage_url, sqlite_path
from coevo.tools import REGISTRY, CallPolicy, Registry, llm_name
from coevo.tools import workspace as default_workspace
from coevo.tools.adapters import outcome_of, to_langchain
from coevo.tools.problems import MAX_DESIGNS

ROUND_TOOLS = ("problem.cheap_objectives", "study.front", "kb.show")
"""The registry tools a round offers (cheap and read-only); the first only to a problem with cheap objectives."""

TOOL_USE = {
    "study_front": "the Pareto front this search has found so far (paid evaluations)",
    "kb_show": "a heuristic's full claim, history and evidence trials, by id",
}
"""How the propose prompt describes each round tool (the cheap-objective tool: :func:`cheap_use`, from the problem)."""

HIDDEN_IN_ROUND = ("hv_ratio", "igd", "front_recall")
"""``study.front`` fields measured against the true front: never shown inside a round."""

READS_EXPENSIVE = {"nb201.query": "accuracy", "nb201.pareto_front": "accuracy"}
"""Registry tools that read an expensive objective of designs not paid for."""

MAX_OBSERVATION_BYTES = 6000
"""Longer tool results (UTF-8 bytes) are cut, with a "truncated: N of M bytes" note, before the model reads them."""


@dataclass(frozen=True)
class ToolBudget:
    """Bounds of one round's tool use (all niches together).

    Attributes:
        max_calls: tool calls answered (cached answers count: a loop is bounded too).
        max_tokens: prompt + completion tokens of the requests of the round's tool-calling
            conversations; past it the model is asked to answer without tools.
    """

    max_calls: int = 12
    max_tokens: int = 60_000


def _round_workspace(storage: str | None) -> Path:
    """Where a round's tool calls may write: the study storage's folder (opening a SQLite storage may create its tables)."""
    path = sqlite_path(resolve_storage_url(storage))
    return path.parent.resolve() if path is not None else default_workspace(storage)


def cheap_objectives(problem: Problem) -> list[Objective]:
    """The objectives of ``problem`` that are free to know for any design (none unless it is Evolvable: only those compute them)."""
    return [o for o in problem.objectives if o.cost == "cheap"] if isinstance(problem, Evolvable) else []


def cheap_use(problem: Problem) -> str:
    """The propose prompt's line on the cheap-objective tool: which of the problem's objectives it gives, with their units.

    A composed problem's are named as any problem's (``nb201-accel``: latency, energy and area from the accelerator model).
    """
    named = ", ".join(f"{o.name} ({o.unit})" for o in cheap_objectives(problem))
    return f"the free objectives {named} of up to {MAX_DESIGNS} designs you consider, before you propose them"


class RoundToolbox:
    """One round's tools for one study (see the module doc).

    Args:
        problem: the round's problem (the cheap-objective tool is bound to its spec).
        study: the study's name.
        storage: the study's storage URL.
        budget: the round's bounds.
        registry: where the tools come from (the one registry).
    """

    def __init__(
        self, problem: Problem, study: str, storage: str | None, *, budget: ToolBudget | None = None, registry: Registry = REGISTRY
    ) -> None:
        spec = problem.spec()
        options = {k: v for k, v in spec.items() if k != "problem"}
        # The only calls that may ask first are the cheap-objective and front tools on a user's problem
        # file: their problem and study are the round's own (fixed, the model cannot change them), code
        # the user's command already loaded, so they are allowed; anything else that asks is declined.
        policy = CallPolicy.model(
            _round_workspace(storage),
            lambda tool, args: tool.name in ("problem.cheap_objectives", "study.front"),
            declined_hint="not inside a search round",
            storage=storage,
        )
        fixed: Mapping[str, dict[str, Any]] = {
            "problem.cheap_objectives": {"problem": str(spec["problem"]), "options": options},
            "study.front": {"study": study, "storage": storage},
            "kb.show": {"study": study, "storage": storage},
        }
        self.registry = registry
        # a problem without cheap objectives is not offered the tool that gives them: every call would be an error
        names = [n for n in ROUND_TOOLS if n != "problem.cheap_objectives" or cheap_objectives(problem)]
        self.tools: dict[str, StructuredTool] = {
            llm_name(name): to_langchain(
                registry.get(name), policy, fixed=fixed[name], hide=HIDDEN_IN_ROUND if name == "study.front" else ()
            )
            for name in names
        }
        self.uses = {**TOOL_USE, llm_name("problem.cheap_objectives"): cheap_use(problem)}
        self.budget = budget or ToolBudget()
        self.cache: dict[str, str] = {}
        self.log: list[dict[str, Any]] = []
        self.tokens = 0

    def langchain_tools(self) -> list[StructuredTool]:
        """The tools to bind to the chat model."""
        return list(self.tools.values())

    def offered(self) -> list[dict[str, str]]:
        """The round's tools as the propose prompt lists them: function name and what it is for."""
        return [{"name": name, "use": self.uses.get(name, "")} for name in self.tools]

    def spent(self) -> str | None:
        """Why no more tool calls are answered this round (None: there is budget left)."""
        if len(self.log) >= self.budget.max_calls:
            return f"this round's {self.budget.max_calls} tool calls are used"
        if self.tokens >= self.budget.max_tokens:
            return f"this round's tool conversations used {self.tokens} of {self.budget.max_tokens} tokens"
        return None

    def refusal(self, name: str) -> str | None:
        """Why ``name`` is not callable in a round (None: it is one of the round's tools)."""
        if name in self.tools:
            return None
        offered = ", ".join(self.tools)
        try:
            tool = self.registry.get(name)
        except Exception:
            return f"error: there is no tool named {name!r}; the tools of this round are: {offered}"
        if tool.name in READS_EXPENSIVE:
            why = f"it reads {READS_EXPENSIVE[tool.name]}, an expensive objective that only a paid evaluation may read"
        else:
            why = "only cheap, read-only tools may be called while proposing"
        return f"refused: {tool.name} is not available inside a search round ({why}); the tools of this round are: {offered}"

    def call(self, call: Mapping[str, Any], niche: str) -> ToolMessage:
        """Answer one tool call of the model (never raises: every failure is an observation)."""
        call = clean_text(dict(call))  # a lone surrogate in the model's call: it is echoed, logged and stored
        name, args, call_id = str(call.get("name")), call.get("args"), str(call.get("id"))
        started = time.perf_counter()
        entry: dict[str, Any] = {"niche": niche, "tool": name, "args": args, "cached": False}
        spent = self.spent()
        refused = self.refusal(name)
        if spent:
            observation, status = f"refused: {spent}; answer now with the JSON object asked for", "refused"
        elif refused:
            observation, status = refused, "refused" if refused.startswith("refused") else "error"
        elif not isinstance(args, Mapping):
            observation, status = f"error: the arguments of {name} must be a JSON object matching its schema", "error"
        else:
            key = f"{name}:{json.dumps(args, sort_keys=True, default=str)}"
            if key in self.cache:
                observation, status = f"(asked before in this round; same answer) {self.cache[key]}", "ok"
                entry["cached"] = True
            else:
                message = self.tools[name].invoke({"name": name, "args": dict(args), "id": call_id, "type": "tool_call"})
                observation, status = str(message.content), outcome_of(message).status
                observation = truncate_result(observation, MAX_OBSERVATION_BYTES)
                self.cache[key] = observation
        entry.update(status=status, chars=len(observation), seconds=round(time.perf_counter() - started, 4))
        self.log.append(entry)
        return ToolMessage(observation, tool_call_id=call_id)

    def invalid(self, call: Mapping[str, Any], niche: str) -> ToolMessage:
        """Answer a tool call whose arguments were not JSON."""
        call = clean_text(dict(call))
        name = str(call.get("name"))
        observation = (
            f"error: the arguments of {name} are not a valid JSON object ({call.get('error') or 'unparseable'}); "
            "call it again with arguments matching its schema"
        )
        self.log.append(
            {"niche": niche, "tool": name, "args": call.get("args"), "cached": False, "status": "error", "chars": len(observation)}
        )
        return ToolMessage(observation, tool_call_id=str(call.get("id")))

    def summary(self) -> dict[str, Any]:
        """The round's tool use, for the round log: counts by tool and status, tokens, every call."""
        by_tool: dict[str, int] = {}
        by_status: dict[str, int] = {}
        for e in self.log:
            by_tool[e["tool"]] = by_tool.get(e["tool"], 0) + 1
            by_status[e["status"]] = by_status.get(e["status"], 0) + 1
        return {
            "calls": len(self.log),
            "cached": sum(1 for e in self.log if e["cached"]),
            "by_tool": by_tool,
            "by_status": by_status,
            "tokens": self.tokens,
            "budget": {"max_calls": self.budget.max_calls, "max_tokens": self.budget.max_tokens},
            "log": self.log[:50],
        }
