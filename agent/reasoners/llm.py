"""The LLM reasoner: any OpenAI-compatible chat endpoint through LangChain.

Structured output is plain JSON in the reply, validated with pydantic; on a reply that is
not JSON, has the wrong shape, or is a refusal, the validation error goes back to the model
and it tries again (``attempts`` times). Transport failures (timeouts, HTTP 429 and 5xx,
connection errors, a body that is not a chat completion) are retried with exponential
backoff; authentication and bad-request errors are not. The client, the retry policy and the cost arithmetic are the shared seam's
(:mod:`agent.llm_client`; its module doc is the retry policy). Replies are cached by prompt
hash in the study's database, so a resumed run replays paid calls for free; tokens, calls and
(given prices) cost are counted.

After repeated failure a niche is skipped for the round with a logged reason; an endpoint
that stays unreachable raises :class:`LLMUnavailableError`, which stops the run with a
message that says how to resume. A request has one deadline (``timeout_s``, connect and
every read of the reply) and its reply a size cap (``max_reply_bytes``): a late or oversized
reply is a failed request like any other (:mod:`agent.llm_client`).

Prompts are bounded too: the search data a prompt carries (elites, rejection notes, new
evidence) fits in :data:`PROMPT_DATA_CHARS` characters, each field in
:data:`PROMPT_ITEM_CHARS`, and an invalid reply is sent back at most :data:`ECHO_CHARS` long;
what was left out is said in the prompt.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any, Literal, TypeVar, cast

import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import BaseModel, Field, ValidationError

from coevo.agent.llm_client import (
    MALFORMED,
    MAX_REPLY_BYTES,
    SEARCH_RETRY,
    EndpointError,
    LLMSettings,
    Price,
    RetryPolicy,
    chat_model,
    clean_text,
    describe_failure,
    openai_client,
    token_usage,
)
from coevo.agent.reasoners._base import KnowledgeContext, ProposeRequest, Reasoner
from coevo.agent.reasoners.cache import CachedReply, ResponseCache, prompt_key
from coevo.agent.reasoners.round_tools import RoundToolbox, ToolBudget
from coevo.knowledge import KnowledgeBase, retrieval
from coevo.knowledge.heuristics import model_claim
from coevo.prompts import PROMPTS, load_prompt
from coevo.search.config import DEFAULT_LLM_TIMEOUT_S
from coevo.search.errors import CoevoError, UserInputError
from coevo.search.niches import niche_of
from coevo.search.proposers import Evaluation, Proposal
from coevo.search.round_log import SKIPPED_UPDATE

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)

PROMPT_DATA_CHARS = 48_000
"""Characters of search data (elites and rejection notes, or new evidence) one prompt carries, about
12k tokens; what does not fit is left out, and the prompt says how much."""

PROMPT_ITEM_CHARS = 2_000
"""The longest single field (a design, a result, a claim, a rejection note) put into a prompt; longer ones are cut, saying so."""

ECHO_CHARS = 4_000
"""How much of an invalid reply goes back to the model with the error (the start, then a note)."""


class LLMUnavailableError(CoevoError):
    """The endpoint kept failing; the run stops and can be resumed."""


class LLMReplyError(CoevoError):
    """The model never produced a valid reply within the allowed attempts."""


class CandidateOut(BaseModel):
    """One proposed design: its string in the problem's design format, why you chose it, and the ids of the heuristics it follows."""

    design: str = Field(min_length=1)
    rationale: str = ""
    heuristics: list[str] = Field(default_factory=list)


class ProposeOut(BaseModel):
    """Your reply to a proposal request: the candidate designs, as many as the request asks for."""

    candidates: list[CandidateOut]


class HeuristicOut(BaseModel):
    """One heuristic: its id (null for a new one), text, niche, confidence (0 to 1), status, and the trials supporting or refuting it."""

    id: str | None = None
    text: str = Field(min_length=3)
    niche: str | None = None
    confidence: float = Field(ge=0.0, le=1.0)
    status: Literal["proposed", "validated", "refuted", "retired"] = "proposed"
    support: list[int] = Field(default_factory=list)
    refute: list[int] = Field(default_factory=list)


class KBUpdateOut(BaseModel):
    """Your reply to a knowledge-base update: every heuristic you keep, change or add."""

    heuristics: list[HeuristicOut]


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def extract_json(text: str) -> str:
    """The JSON object in a reply: inside a code fence if there is one, else from the first '{'."""
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if start != -1 and end > start else text.strip()


def parse_reply(text: str, schema: type[T]) -> tuple[T | None, str]:
    """``(the reply parsed into schema, "")``, or ``(None, what is wrong with it)``."""
    if text.startswith("REFUSAL:") or not text.strip():
        return None, "the reply was a refusal or empty; this is a benign engineering task, please answer"
    try:
        return schema.model_validate_json(extract_json(text)), ""
    except ValidationError as exc:
        return None, "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors()[:5])


def invalid_reply(problem: str) -> str:
    """What the model is told after an invalid reply."""
    return f"Your reply was not valid: {clip(problem, PROMPT_ITEM_CHARS)}. Reply with the JSON object only, in the format asked."


def clip(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and a note saying how long it was.

    >>> clip("abcdef", 3)
    'abc... [cut: 3 of 6 characters]'
    """
    return text if len(text) <= limit else f"{text[:limit]}... [cut: {limit} of {len(text)} characters]"


R = TypeVar("R", str, dict[str, Any])
_ROW_CHARS = 24
"""What a template adds around one row's fields (``- trial 12 [c2]: ... -> ...``), counted against the budget."""


def fit(rows: Sequence[R], budget: int, *, newest: bool = False) -> tuple[list[R], int]:
    """The rows (each text field clipped to :data:`PROMPT_ITEM_CHARS`) that fit in ``budget`` characters, and how many did not.

    Args:
        rows: prompt rows (dicts of fields, or plain strings), in the order shown.
        budget: characters all kept rows may take.
        newest: keep the last rows rather than the first (the order shown is kept).

    >>> fit(["aaaa", "bbbb", "cccc"], 60)
    (['aaaa', 'bbbb'], 1)
    >>> fit(["aaaa", "bbbb", "cccc"], 60, newest=True)
    (['bbbb', 'cccc'], 1)
    """

    def clipped(row: R) -> R:
        if isinstance(row, str):
            return clip(row, PROMPT_ITEM_CHARS)
        return cast(R, {k: clip(v, PROMPT_ITEM_CHARS) if isinstance(v, str) else v for k, v in row.items()})

    kept: list[R] = []
    used = 0
    for row in reversed(rows) if newest else rows:
        row = clipped(row)
        size = _ROW_CHARS + (len(row) if isinstance(row, str) else sum(len(str(v)) for v in row.values()))
        if used + size > budget:
            break
        kept.append(row)
        used += size
    if newest:
        kept.reverse()
    return kept, len(rows) - len(kept)


def left_out(parts: Sequence[tuple[int, int, str]]) -> str:
    """The prompt's note on what did not fit: ``(left out, of, what)`` per list; empty when nothing was.

    >>> left_out([(3, 10, "elite designs (the last)"), (0, 2, "rejection notes")])
    'Left out for length: 3 of 10 elite designs (the last); this prompt carries at most 48000 characters of search data.'
    """
    said = [f"{n} of {total} {what}" for n, total, what in parts if n]
    if not said:
        return ""
    return f"Left out for length: {', '.join(said)}; this prompt carries at most {PROMPT_DATA_CHARS} characters of search data."


def _to_langchain(messages: list[dict[str, str]]) -> list[BaseMessage]:
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds[m["role"]](content=m["content"]) for m in messages]


class LLMReasoner(Reasoner):
    """Reasoner backed by an OpenAI-compatible chat endpoint.

    Args:
        model: model name the endpoint serves.
        base_url: endpoint, e.g. ``http://localhost:8000/v1``.
        api_key: key; local servers accept any (``not-needed`` is sent when None).
        cache: response cache (in the study's database).
        timeout_s: the deadline of one request, connect and every read of the reply (``--llm-timeout``).
        transport_retries: retries of a failed request (timeouts, 429, 5xx, connection, a
            malformed body) under the seam's policy; default :data:`agent.llm_client.SEARCH_RETRY`'s.
        attempts: tries per structured reply, the validation error fed back each time.
        backoff_s: first backoff; doubles per retry (default ``SEARCH_RETRY``'s).
        price_per_mtok: (input, output) USD per million tokens, for cost accounting.
        temperature: sampling temperature.
        tools: let the model call the round's cheap read-only tools while it proposes
            (:mod:`agent.reasoners.round_tools`); False: the plain prompt.
        tool_budget: bounds of one round's tool use.
        max_tool_steps: model requests of one niche's tool-calling conversation.
        public_url: the endpoint as the study records it, when it differs from ``base_url``
            (``simulated``: each process starts its own loopback endpoint).
        max_reply_bytes: the longest reply read; a longer one is cut off and is a malformed reply.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: str | None = None,
        cache: ResponseCache | None = None,
        timeout_s: float = DEFAULT_LLM_TIMEOUT_S,
        transport_retries: int = SEARCH_RETRY.retries,
        attempts: int = 3,
        backoff_s: float = SEARCH_RETRY.backoff_s,
        price_per_mtok: tuple[float, float] | None = None,
        temperature: float = 0.2,
        tools: bool = True,
        tool_budget: ToolBudget | None = None,
        max_tool_steps: int = 6,
        public_url: str | None = None,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        super().__init__()
        for name in PROMPTS:
            load_prompt(name)  # a broken template fails here, at start-up
        self.settings = LLMSettings(
            base_url=base_url, model=model, api_key=api_key, timeout_s=timeout_s, temperature=temperature, max_reply_bytes=max_reply_bytes
        )
        self.model = model
        self.base_url = base_url
        self.public_url = public_url or base_url
        self.timeout_s = timeout_s
        self.label = f"llm:{model}"
        self.cache = cache
        self.failed_prompts: set[str] = set()
        """Keys of propose prompts that got no valid reply (with a cache, the same prompt would get the same replies)."""
        self.transport_retries = transport_retries
        self.attempts = attempts
        self.retry = RetryPolicy(retries=transport_retries, backoff_s=backoff_s)
        self.price = Price(*price_per_mtok) if price_per_mtok else None
        self.temperature = temperature
        self.usage.cost_usd = 0.0 if price_per_mtok else None
        self.chat = chat_model(self.settings)
        self.tools = tools
        self.tool_budget = tool_budget or ToolBudget()
        self.max_tool_steps = max_tool_steps
        self.tool_support: bool | None = None
        """Whether the endpoint takes tool-calling requests (None: not asked yet)."""
        self._box: RoundToolbox | None = None
        self._box_key: tuple[str, int] | None = None

    def config(self) -> dict[str, Any]:
        return {
            "kind": "llm",
            "model": self.model,
            "base_url": self.public_url,
            "timeout_s": self.timeout_s,
            "price_per_mtok": list(self.price) if self.price else None,
            "tools": self.tools,
        }

    def check_endpoint(self) -> str:
        """Make sure the endpoint answers for this model before a search starts.

        Asks for the served models (``GET /models``); when the server has no such route or
        does not list the model, sends one 1-token request instead. Returns a line saying what
        answered.

        Raises:
            LLMUnavailableError: unreachable, the key was refused, or the model is not served;
                the message says what to change. Nothing of the search has started.
        """
        client = openai_client(self.settings, timeout_s=min(self.timeout_s, 20.0))  # a check, not a search: no retries
        where = f"the LLM endpoint {self.base_url}"
        try:
            try:
                served = [m.id for m in client.models.list()]
            except (openai.NotFoundError, openai.UnprocessableEntityError, openai.InternalServerError, openai.BadRequestError):
                served = []  # no models route (some servers): one token tells
            except openai.APIStatusError as exc:
                if exc.status_code in (401, 403):
                    raise
                served = []
            if self.model in served:
                return f"{where} serves {self.model}"
            client.chat.completions.create(model=self.model, messages=[{"role": "user", "content": "ping"}], max_tokens=1)
            return f"{where} answered a 1-token request for {self.model}"
        except openai.NotFoundError as exc:
            raise LLMUnavailableError(f"{where} does not serve model {self.model!r} (HTTP 404): set COEVO_LLM_MODEL / --llm-model") from exc
        except (openai.APIStatusError, openai.APIConnectionError) as exc:  # key refused, unreachable, timed out, HTTP error
            raise LLMUnavailableError(describe_failure(exc, where)) from exc
        except MALFORMED as exc:  # a 200 whose body is no chat completion (not JSON, another API): one line, not a traceback
            raise LLMUnavailableError(describe_failure(exc, where)) from exc

    # ------------------------------------------------------------ transport

    def complete(self, messages: list[dict[str, str]], study: str = "", storage: str | None = None) -> str:
        """One chat completion, from study ``study``'s cache when this exact prompt was paid for before.

        The cache is the one given to the reasoner, else the one in ``storage`` (the study's).
        """
        if self.cache is None and storage is not None:
            from coevo.agent.reasoners.cache import ResponseCache

            self.cache = ResponseCache(storage)  # one reasoner serves one study, so one storage
        key = prompt_key(self.model, messages, self.temperature)
        if self.cache is not None:
            hit = self.cache.get(study, key)
            if hit is not None:
                self.usage.cached_calls += 1
                return hit.text
        reply = self._call(messages)
        self._count(reply)
        if self.cache is not None:
            self.cache.put(study, key, self.model, reply)
        return reply.text

    def _count(self, reply: CachedReply) -> None:
        self.usage.calls += 1
        self.usage.prompt_tokens += reply.prompt_tokens
        self.usage.completion_tokens += reply.completion_tokens
        if self.price and self.usage.cost_usd is not None:
            self.usage.cost_usd += self.price.cost_usd(reply.prompt_tokens, reply.completion_tokens)

    def _call(self, messages: list[dict[str, str]]) -> CachedReply:
        """One paid request under the seam's retry policy; a refusal comes back as ``REFUSAL: ...`` text."""
        try:
            msg = self.retry.call(lambda: self.chat.invoke(_to_langchain(messages)), where=f"the LLM endpoint {self.base_url}")
        except EndpointError as exc:
            tried = f" ({exc.attempts} attempts)" if exc.transient else ""
            raise LLMUnavailableError(f"{exc}{tried}; then rerun the same command to resume") from exc
        prompt_tokens, completion_tokens = token_usage(msg)
        refusal = msg.additional_kwargs.get("refusal") if isinstance(msg, AIMessage) else None
        text = msg.content if isinstance(msg.content, str) else json.dumps(msg.content)
        if refusal:
            text = f"REFUSAL: {refusal}"
        return CachedReply(clean_text(text), prompt_tokens, completion_tokens)  # it is cached in SQLite and quoted in prompts

    def structured(self, messages: list[dict[str, str]], schema: type[T], study: str = "", storage: str | None = None) -> T:
        """A reply parsed into ``schema``; invalid replies are sent back with the error."""
        convo = list(messages)
        problem = ""
        for _ in range(self.attempts):
            text = self.complete(convo, study, storage)
            parsed, problem = parse_reply(text, schema)
            if parsed is not None:
                return parsed
            convo = [*convo, {"role": "assistant", "content": clip(text, ECHO_CHARS)}, {"role": "user", "content": invalid_reply(problem)}]
        raise LLMReplyError(f"no valid reply after {self.attempts} attempts: {problem}")

    # ------------------------------------------------------------ reasoning

    @staticmethod
    def _result(problem: Any, e: Evaluation) -> str:
        return ", ".join(f"{o.name}={e.values[o.name]:.4g}{o.unit if o.unit != '%' else '%'}" for o in problem.objectives)

    def update_knowledge(self, kb: KnowledgeBase, evidence: Sequence[Evaluation], ctx: KnowledgeContext) -> list[str]:
        rows = [e for e in evidence if e.query]
        if not rows:
            return []
        try:
            out = self.structured(self._update_messages(kb, rows, ctx), KBUpdateOut, ctx.study, ctx.storage)
        except LLMReplyError as exc:
            # the round goes on with the knowledge base as it was; say so where the user looks (the log and the report)
            log.warning("knowledge-base update of round %d skipped: %s", ctx.round, exc)
            return [f"{SKIPPED_UPDATE} {exc}"]
        known = {e.trial_number for e in ctx.evaluations}
        niche_ids = {n.id for n in ctx.niches}
        changes = []
        for item in out.heuristics:
            existing = kb.heuristics.get(item.id) if item.id else None
            if existing is not None and existing.status in ("accepted", "rejected"):
                continue  # a person decided: the model cannot overrule
            key = existing.key if existing else f"llm:{item.text.strip().lower()}"
            status, confidence = model_claim(existing or kb.by_key(key), item.status, item.confidence)  # the model's word is not evidence
            h, created = kb.upsert(
                key,
                ctx.round,
                text=item.text,
                scope={**ctx.problem.spec(), "niche": item.niche if item.niche in niche_ids else None},
                confidence=confidence,
                status=status,
                author=self.model,
                support=[t for t in item.support if t in known],  # invented trial numbers are dropped
                refute=[t for t in item.refute if t in known],
                note=f"{'revised' if existing else 'proposed'} by {self.model} from the evidence up to round {ctx.round - 1}",
            )
            changes.append(f"{'created' if created else 'updated'} {h.id}: {h.text} [{h.status}, {h.confidence:.2f}]")
        return changes

    def _update_messages(self, kb: KnowledgeBase, rows: Sequence[Evaluation], ctx: KnowledgeContext) -> list[dict[str, str]]:
        """The ``kb_update`` prompt: the new evidence (the newest that fit) and the relevant existing heuristics."""
        problem = ctx.problem
        evidence, dropped = fit(
            [
                {
                    "trial": e.trial_number,
                    "niche": niche_of(ctx.niches, e.point),
                    "design": problem.describe(e.point),
                    "result": self._result(problem, e),
                }
                for e in rows
            ],
            PROMPT_DATA_CHARS,
            newest=True,
        )
        heuristics, _ = fit(
            [
                {"id": h.id, "status": h.status, "confidence": h.confidence, "text": h.text}
                for h in retrieval.retrieve(
                    kb.heuristics.values(), problem.spec(), None, token_budget=ctx.token_budget, objectives=problem.objectives
                )
            ],
            PROMPT_DATA_CHARS,
        )  # retrieval's token budget already bounds them; this clips a single overlong claim
        return load_prompt("kb_update").render(
            problem=f"{problem.name} {problem.spec()}",
            objectives=", ".join(f"{o.name} ({o.direction}, {o.unit})" for o in problem.objectives),
            design_format=problem.design_format,
            evidence=evidence,
            heuristics=heuristics,
            left_out=left_out([(dropped, len(rows), "trials of new evidence (the oldest)")]),
        )

    # ------------------------------------------------------------ tool calling

    def toolbox(self, request: ProposeRequest) -> RoundToolbox:
        """The round's toolbox (one per study and round: its bounds and cache span the round's niches)."""
        key = (request.study, request.round)
        if self._box is None or self._box_key != key:
            self._box = RoundToolbox(request.problem, request.study, request.storage, budget=self.tool_budget)
            self._box_key = key
        return self._box

    def share_toolbox(self, box: RoundToolbox, request: ProposeRequest) -> None:
        """Use ``box`` for ``request``'s round, so several reasoners (an ensemble) draw on one bound and one cache."""
        self._box, self._box_key = box, (request.study, request.round)

    def _tool_reply(self, convo: list[BaseMessage], box: RoundToolbox | None, study: str, storage: str | None) -> AIMessage:
        """One reply in a tool-calling conversation (``box`` None: tools not offered), from the cache when paid before.

        Raises:
            LLMUnavailableError: the endpoint kept failing.
            EndpointError: (only with tools offered) the endpoint rejected the request itself.
        """
        if self.cache is None and storage is not None:
            self.cache = ResponseCache(storage)
        offered = sorted(box.tools) if box else []
        key = prompt_key(self.model, [{"tools": ",".join(offered)}, *[_serial(m) for m in convo]], self.temperature)
        hit = self.cache.get(study, key) if self.cache is not None else None
        if hit is not None:
            self.usage.cached_calls += 1
            data = json.loads(hit.text)
            return AIMessage(data["content"], tool_calls=data["tool_calls"], invalid_tool_calls=data.get("invalid_tool_calls", []))
        model = self.chat.bind_tools(box.langchain_tools()) if box else self.chat
        try:
            msg = self.retry.call(lambda: model.invoke(convo), where=f"the LLM endpoint {self.base_url}")
        except EndpointError as exc:
            if box is not None and not exc.transient:
                raise  # the caller decides whether the endpoint lacks tool calling
            tried = f" ({exc.attempts} attempts)" if exc.transient else ""
            raise LLMUnavailableError(f"{exc}{tried}; then rerun the same command to resume") from exc
        ai = msg if isinstance(msg, AIMessage) else AIMessage(msg.content)
        prompt_tokens, completion_tokens = token_usage(ai)
        text = ai.content if isinstance(ai.content, str) else json.dumps(ai.content)
        refusal = ai.additional_kwargs.get("refusal")
        if refusal:
            text = f"REFUSAL: {refusal}"
        reply = AIMessage(text, tool_calls=ai.tool_calls, invalid_tool_calls=ai.invalid_tool_calls)
        self._count(CachedReply("", prompt_tokens, completion_tokens))
        if box is not None:
            box.tokens += prompt_tokens + completion_tokens
        if self.cache is not None:
            blob = {"content": text, "tool_calls": list(ai.tool_calls), "invalid_tool_calls": list(ai.invalid_tool_calls)}
            self.cache.put(study, key, self.model, CachedReply(json.dumps(blob, default=str), prompt_tokens, completion_tokens))
        return reply

    def _propose_with_tools(self, request: ProposeRequest, messages: list[dict[str, str]]) -> ProposeOut | None:
        """The proposals of a tool-calling conversation; None when the endpoint turned out not to take tools."""
        box = self.toolbox(request)
        convo = _to_langchain(messages)
        problem = ""
        for _step in range(self.max_tool_steps + self.attempts):
            offer = box if box.spent() is None else None
            try:
                ai = self._tool_reply(convo, offer, request.study, request.storage)
            except EndpointError as exc:
                if self.tool_support:  # tool calls worked before: this request failed for another reason
                    raise LLMReplyError(str(exc)) from exc
                self.tool_support = False
                note = f"the endpoint refused a tool-calling request ({exc}); this run goes on with the plain prompt"
                log.warning(note)
                self.trace.setdefault("notes", []).append(note)
                return None
            self.tool_support = True
            # what goes back to the model is bounded (the reply's tool calls are kept whole)
            convo.append(ai if len(str(ai.content)) <= ECHO_CHARS else ai.model_copy(update={"content": clip(str(ai.content), ECHO_CHARS)}))
            if offer is not None and (ai.tool_calls or ai.invalid_tool_calls):
                convo += [box.call(dict(c), request.niche.id) for c in ai.tool_calls]
                convo += [box.invalid(dict(c), request.niche.id) for c in ai.invalid_tool_calls]
                self.usage.tool_calls += len(ai.tool_calls) + len(ai.invalid_tool_calls)
                continue
            if ai.tool_calls or ai.invalid_tool_calls:
                # tools were no longer offered: close the calls so the conversation stays well formed
                convo += [ToolMessage(f"refused: {box.spent()}; answer now", tool_call_id=str(c.get("id"))) for c in ai.tool_calls]
                convo += [ToolMessage("refused: answer now", tool_call_id=str(c.get("id"))) for c in ai.invalid_tool_calls]
                continue
            parsed, problem = parse_reply(str(ai.content), ProposeOut)
            if parsed is not None:
                return parsed
            convo.append(HumanMessage(invalid_reply(problem)))
        raise LLMReplyError(
            f"no valid reply within {self.max_tool_steps + self.attempts} requests: {problem or 'the model kept calling tools'}"
        )

    def propose(self, request: ProposeRequest) -> list[Proposal]:
        problem = request.problem
        use_tools = self.tools and self.tool_support is not False
        box = self.toolbox(request) if use_tools else None
        messages = self._propose_messages(request, box)
        # the engine sends a request back unchanged when nothing came of it. Without tools and with a reply cache, the
        # same prompt gets the same cached invalid replies again (and the same warning): not asked again. With tools, a
        # retry may differ (the round's tool budget spent, a tool's answer), so it is asked.
        failed_key = prompt_key(self.model, messages, self.temperature)
        replays = box is None and (self.cache is not None or request.storage is not None)
        if replays and failed_key in self.failed_prompts:
            return []
        out: ProposeOut | None = None
        try:
            if box is not None:
                out = self._propose_with_tools(request, messages)
                if out is None:  # no tool calling at this endpoint: the same request, plain
                    return self.propose(request)
            else:
                out = self.structured(messages, ProposeOut, request.study, request.storage)
        except LLMReplyError as exc:
            if replays:
                self.failed_prompts.add(failed_key)
            log.warning("niche %s skipped in round %d: %s", request.niche.id, request.round, exc)
            self.trace.setdefault("notes", []).append(f"niche {request.niche.id} skipped: {exc}")
            return []
        finally:
            if box is not None:
                self.trace["tools"] = box.summary()
        known = {h.id for h in request.heuristics}
        proposals = []
        for cand in out.candidates[: request.quota + 4]:
            try:
                point = problem.parse_design(cand.design)
            except UserInputError as exc:
                # handed back to the proposer as an invalid point, so the reason reaches the model
                proposals.append(Proposal(cand.design, error=f"{cand.design!r} is not a valid design: {exc}"))
                continue
            cited = tuple(h for h in cand.heuristics if h in known)
            proposals.append(
                Proposal(
                    point,
                    rationale=cand.rationale,
                    heuristics=cited,
                    attrs={"niche": request.niche.id, "reasoner": self.label, "model": self.model},
                )
            )
        return proposals

    def _propose_messages(self, request: ProposeRequest, box: RoundToolbox | None) -> list[dict[str, str]]:
        """The ``propose`` prompt: the niche's best designs and the latest rejection notes that fit, and the heuristics."""
        problem = request.problem
        elites, elites_out = fit(
            [{"trial": e.trial_number, "design": problem.describe(e.point), "result": self._result(problem, e)} for e in request.elites],
            PROMPT_DATA_CHARS * 3 // 4,
        )
        used = sum(_ROW_CHARS + sum(len(str(v)) for v in row.values()) for row in elites)
        feedback, feedback_out = fit(list(request.feedback), PROMPT_DATA_CHARS - used, newest=True)
        heuristics, _ = fit([{"id": h.id, "text": h.text, "confidence": h.confidence} for h in request.heuristics], PROMPT_DATA_CHARS)
        return load_prompt("propose").render(
            problem=f"{problem.name} {problem.spec()}",
            objectives=", ".join(f"{o.name} ({o.direction}, {o.unit})" for o in problem.objectives),
            design_format=problem.design_format,
            niche_id=request.niche.id,
            niche_description=request.niche.description,
            quota=request.quota + 2,  # spares: some may be duplicates or outside the niche
            elites=elites,
            heuristics=heuristics,
            feedback=feedback,
            tools=box.offered() if box else [],
            left_out=left_out(
                [
                    (elites_out, len(request.elites), "best designs of this niche (the last listed)"),
                    (feedback_out, len(request.feedback), "rejection notes (the oldest)"),
                ]
            ),
        )


def _serial(message: BaseMessage) -> dict[str, Any]:
    """A message as plain data, for the cache key of a tool-calling conversation."""
    data: dict[str, Any] = {"role": message.type, "content": message.content}
    if isinstance(message, AIMessage) and message.tool_calls:
        data["tool_calls"] = [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        data["tool_call_id"] = message.tool_call_id
    return data
