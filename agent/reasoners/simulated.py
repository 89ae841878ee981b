"""Simulated reasoners of known quality: a loopback endpoint that speaks the OpenAI protocol. NOT a language model.

No model is reachable from the machines coevo is built on, so the engine's sensitivity to
its reasoner's quality is measured against scripted reasoners whose quality is set by
construction. They answer coevo's real prompts (the propose and knowledge-update templates)
over HTTP on 127.0.0.1, so the whole LLM code path runs: LangChain, the ``openai`` client,
tool binding, the tool loop, validation, the reply cache, screening. Every label says
``simulated``.

The model name chooses the quality (``sim-<quality>``):

* ``sim-random``: uniformly random valid designs of the niche (the floor);
* ``sim-mutate``: random one- and two-step mutations of the elites the prompt shows;
* ``sim-oracle-<s>``: mutations of the elites ranked by their **true** first objective plus
  Gaussian noise of ``s`` times that objective's spread over the candidates (``s = 0``: a
  perfect ranker). It reads the benchmark's truth, which no real model can: it stands for a
  model that knows the space well, with ``s`` saying how well.

When the request offers tools, the simulated reasoner first asks
``problem_cheap_objectives`` for its candidates (as a model that uses its tools would), then
uses the latencies: ``random`` spreads its picks over the latency range, ``mutate`` prefers
mutations faster than their parent, ``oracle`` drops candidates an elite dominates under its
noisy belief. Without tools it picks blind to latency. A ``-notools`` suffix
(``sim-mutate-notools``) makes the endpoint reject requests that carry tools with HTTP 400,
as servers without tool calling do. Knowledge updates are answered with no heuristics: the
simulated reasoners do not write the knowledge base.

Token counts are estimates (characters / 4), labelled so where they are reported.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import random
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from coevo.search.errors import UserInputError
from coevo.search.problem import Evolvable, Point, Problem
from coevo.search.problems import problem_from_spec

QUALITIES = ("random", "mutate", "oracle")
CHEAP_TOOL = "problem_cheap_objectives"
MAX_POOL = 64


@dataclass(frozen=True)
class Quality:
    """A simulated reasoner's behaviour, read from its model name."""

    kind: str
    noise: float = 0.0
    tool_api: bool = True

    @classmethod
    def parse(cls, model: str) -> Quality:
        """``sim-random``, ``sim-mutate``, ``sim-oracle-<s>``, each optionally ending ``-notools``.

        Raises:
            UserInputError: any other name (the message lists the valid ones).
        """
        name, tool_api = (model[: -len("-notools")], False) if model.endswith("-notools") else (model, True)
        m = re.fullmatch(r"sim-(random|mutate)|sim-oracle-(\d+(?:\.\d+)?)", name)
        if not m:
            raise UserInputError(
                f"unknown simulated reasoner {model!r}: use sim-random, sim-mutate or sim-oracle-<noise> (e.g. sim-oracle-0.5), "
                "optionally ending -notools"
            )
        if m.group(1):
            return cls(m.group(1), 0.0, tool_api)
        return cls("oracle", float(m.group(2)), tool_api)


@lru_cache(maxsize=8)
def _problem(spec_text: str) -> Problem:
    return problem_from_spec(ast.literal_eval(spec_text))


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)  # an estimate: no tokenizer for a model that does not exist


class _Request:
    """What a propose prompt says, read back from its text."""

    def __init__(self, body: dict[str, Any]) -> None:
        messages = body.get("messages", [])
        self.user = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
        self.tool_results = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
        self.offers_tools = bool(body.get("tools"))
        head = re.search(r"^Problem: (\S+) (\{.*\})$", self.user, re.M)
        self.is_propose = bool(head) and "Propose " in self.user and "Niche " in self.user
        self.problem: Problem | None = _problem(head.group(2)) if head and self.is_propose else None
        niche = re.search(r"^Niche (\S+?):", self.user, re.M)
        self.niche = niche.group(1) if niche else ""
        quota = re.search(r"Propose (\d+) new designs", self.user)
        self.quota = int(quota.group(1)) if quota else 1
        self.elites: list[tuple[str, dict[str, float]]] = []
        for design, result in re.findall(r"^- trial \d+: (.+?) -> (.+)$", self.user, re.M):
            values = {k: float(v) for k, v in re.findall(r"(\w+)=([-+\d.eE]+)", result)}
            self.elites.append((design.strip(), values))
        self.rejected = re.findall(r"^- (.+?) (?:was already evaluated or proposed|is outside niche)", self.user, re.M)
        self.seed = int(hashlib.sha256(self.user.encode()).hexdigest()[:12], 16)


class SimulatedReasoner:
    """The policy of one simulated model (see the module doc)."""

    def __init__(self, quality: Quality) -> None:
        self.quality = quality

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message for one chat-completions request: content, or tool calls."""
        req = _Request(body)
        if not req.is_propose or req.problem is None:
            return {"content": json.dumps({"heuristics": []})}  # knowledge updates: the simulated reasoners write none
        problem = req.problem
        if not isinstance(problem, Evolvable):
            return {"content": json.dumps({"candidates": []})}
        rng = random.Random(req.seed)
        pool = self._pool(problem, req, rng)
        if req.offers_tools and not req.tool_results and pool:
            # a model that uses its tools asks the free objectives of what it is considering
            designs = [problem.describe(p) for p in pool[:MAX_POOL]]
            return {"tool_calls": [{"name": CHEAP_TOOL, "arguments": {"designs": designs}}]}
        cheap = self._cheap_from_tools(req.tool_results)
        picks = self._pick(problem, req, pool, cheap, rng)
        label = f"simulated {self.quality.kind}" + (f" (noise {self.quality.noise:g})" if self.quality.kind == "oracle" else "")
        candidates = [{"design": problem.describe(p), "rationale": f"{label}; {why}", "heuristics": []} for p, why in picks]
        return {"content": json.dumps({"candidates": candidates})}

    # ------------------------------------------------------------ candidates

    def _pool(self, problem: Any, req: _Request, rng: random.Random) -> list[Point]:
        niche = next((n for n in problem.niches() if n.id == req.niche), None)
        avoid = {d.strip() for d in req.rejected} | {d for d, _ in req.elites}

        def ok(p: Point) -> bool:
            return (niche is None or niche.contains(p)) and problem.describe(p) not in avoid

        size = min(MAX_POOL, max(3 * req.quota, 12))
        found: dict[str, Point] = {}
        if self.quality.kind == "random" or not req.elites:
            for _ in range(20000):
                p = problem.random_point(rng)
                if ok(p):
                    found.setdefault(problem.describe(p), p)
                    if len(found) >= size:
                        break
            return list(found.values())
        parents = []
        for design, _ in req.elites:
            with contextlib.suppress(UserInputError):
                parents.append(problem.parse_design(design))
        for _ in range(size * 20):
            if not parents:
                break
            child = rng.choice(problem.neighbours(rng.choice(parents)))
            if rng.random() < 0.5:
                child = rng.choice(problem.neighbours(child))
            if ok(child):
                found.setdefault(problem.describe(child), child)
                if len(found) >= size:
                    break
        return list(found.values())

    @staticmethod
    def _cheap_from_tools(results: Sequence[str]) -> dict[str, dict[str, float]]:
        cheap: dict[str, dict[str, float]] = {}
        for text in results:
            text = text.split(") ", 1)[1] if text.startswith("(asked before") else text
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                for row in json.loads(text).get("value", {}).get("designs", []):
                    cheap[str(row["design"])] = {k: float(v) for k, v in row.items() if k not in ("design", "error")}
        return cheap

    def _pick(
        self, problem: Any, req: _Request, pool: list[Point], cheap: dict[str, dict[str, float]], rng: random.Random
    ) -> list[tuple[Point, str]]:
        if not pool:
            return []
        quota = min(req.quota, len(pool))
        second = problem.front_objectives[1]
        lat = np.array([cheap.get(problem.describe(p), {}).get(second, np.nan) for p in pool])
        knows_cheap = bool(cheap) and not np.isnan(lat).all()
        if self.quality.kind == "oracle":
            return self._believed(problem, req, pool, lat if knows_cheap else None, quota)
        if not knows_cheap:
            return [(pool[k], "picked without the free objectives") for k in rng.sample(range(len(pool)), quota)]
        order = list(np.argsort(np.nan_to_num(lat, nan=np.inf), kind="stable"))
        if self.quality.kind == "mutate":
            parent_lat = min((v.get(second, np.inf) for _, v in req.elites), default=np.inf)
            return [(pool[k], f"{second} {lat[k]:.4g} (fastest elite {parent_lat:.4g})") for k in order[:quota]]
        picks = [order[int(i)] for i in np.linspace(0, len(order) - 1, quota).round().astype(int)]  # spread over the latency range
        return [(pool[k], f"{second} {lat[k]:.4g}, spread over the range") for k in dict.fromkeys(picks)]

    def _believed(self, problem: Any, req: _Request, pool: list[Point], lat: np.ndarray | None, quota: int) -> list[tuple[Point, str]]:
        """The oracle's picks: best by its noisy view of the truth; with the free objectives (``lat``), non-dominated first."""
        first, second = problem.front_objectives
        truth = np.array([problem.evaluate(p)[first] for p in pool])  # the simulator's privilege, not the engine's
        spread = float(np.std(truth)) or 1.0
        belief = truth + np.random.default_rng(req.seed).normal(0.0, self.quality.noise * spread, len(pool))
        order = list(np.argsort(-belief, kind="stable"))
        if lat is not None:
            dominated = [
                any(v.get(first, -np.inf) >= belief[k] and v.get(second, np.inf) <= lat[k] for _, v in req.elites) for k in range(len(pool))
            ]
            order = [k for k in order if not dominated[k]] + [k for k in order if dominated[k]]
        return [(pool[k], f"believed {first} {belief[k]:.4g}") for k in order[:quota]]


class SimulatedEndpoint:
    """A loopback OpenAI-protocol server whose models are simulated reasoners (``sim-...``); a context manager.

    ``GET /v1/models`` lists a few names; any ``sim-...`` name is served.
    """

    def __init__(self) -> None:
        endpoint = self
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                names = ["sim-random", "sim-mutate", "sim-oracle-0.5"]
                self._send(
                    200, {"object": "list", "data": [{"id": n, "object": "model", "created": 0, "owned_by": "coevo"} for n in names]}
                )

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                endpoint.requests += 1
                try:
                    quality = Quality.parse(str(body.get("model")))
                except UserInputError as exc:
                    self._send(404, {"error": {"message": str(exc), "type": "not_found"}})
                    return
                if body.get("tools") and not quality.tool_api:
                    self._send(400, {"error": {"message": "this endpoint does not support tools", "type": "invalid_request_error"}})
                    return
                try:
                    message = SimulatedReasoner(quality).answer(body)
                except Exception as exc:  # a bug in the simulator must show, not hang the client
                    self._send(
                        500, {"error": {"message": f"simulated reasoner failed: {type(exc).__name__}: {exc}", "type": "server_error"}}
                    )
                    return
                calls = [
                    {
                        "id": f"call_{endpoint.requests}_{k}",
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                    }
                    for k, c in enumerate(message.get("tool_calls", []))
                ]
                reply: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
                if calls:
                    reply["tool_calls"] = calls
                prompt = _tokens(json.dumps(body.get("messages", [])) + json.dumps(body.get("tools", [])))
                completion = _tokens(json.dumps(reply))
                usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
                self._send(
                    200,
                    {
                        "id": f"sim-{endpoint.requests}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model"),
                        "choices": [{"index": 0, "message": reply, "finish_reason": "tool_calls" if calls else "stop"}],
                        "usage": usage,
                    },
                )

            def _send(self, status: int, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True, name="coevo-simulated-llm")

    @property
    def url(self) -> str:
        """The base URL for the client (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> SimulatedEndpoint:
        """Serve in a daemon thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> SimulatedEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: SimulatedEndpoint | None = None
_LOCK = threading.Lock()


def shared_endpoint() -> SimulatedEndpoint:
    """This process's simulated endpoint, started on first use (``--llm-base-url simulated``)."""
    global _SHARED
    with _LOCK:
        if _SHARED is None:
            _SHARED = SimulatedEndpoint().start()
        return _SHARED
