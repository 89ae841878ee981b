"""A scripted 'model' for the NB201 prompts: answers like a competent LLM would, deterministically."""

from __future__ import annotations

import json
import random
import re
from typing import Any

from coevo.search.nb201 import format_arch, random_cell
from coevo.search.nb201.problem import complexity_niches


def _tokens(text: str) -> int:
    # the usual ~4 characters per token of English/JSON; a real tokenizer will differ a little
    return max(1, round(len(text) / 4))


def reply(request: dict[str, Any]) -> dict[str, Any]:
    """Answer a propose or kb_update prompt with valid JSON; token counts estimated as chars / 4."""
    answer = _reply(request)
    prompt_chars = "".join(m["content"] or "" for m in request["messages"])
    return {**answer, "prompt_tokens": _tokens(prompt_chars), "completion_tokens": _tokens(answer["content"])}


def _reply(request: dict[str, Any]) -> dict[str, Any]:
    first = next(m["content"] for m in request["messages"] if m["role"] == "user")
    rng = random.Random(first)
    if "Update the knowledge base" in first:
        trials = [int(t) for t in re.findall(r"trial (\d+)", first)][:3]
        return {
            "content": json.dumps(
                {
                    "heuristics": [
                        {
                            "id": None,
                            "text": "more 3x3 convolutions raise accuracy",
                            "niche": None,
                            "confidence": 0.8,
                            "status": "proposed",
                            "support": [*trials, 99999],
                            "refute": [],
                        }
                    ]
                }
            )
        }
    niche_id = re.search(r"Niche (\S+):", first).group(1)  # type: ignore[union-attr]
    quota = int(re.search(r"Propose (\d+) new designs", first).group(1))  # type: ignore[union-attr]
    niche = next(n for n in complexity_niches() if n.id == niche_id)
    cited = re.findall(r"- (H\d+):", first)[:1]
    designs: list[str] = []
    while len(designs) < quota:
        cell = random_cell(rng)
        if niche.contains(cell):
            designs.append(format_arch(cell))
    # a rationale of realistic length (about two sentences), so completion sizes are realistic too
    rationale = "Keeps the niche's best skip path and swaps one op the heuristics rate well; expected to extend the front at this latency."
    candidates = [{"design": d, "rationale": rationale, "heuristics": cited} for d in designs]
    return {"content": "```json\n" + json.dumps({"candidates": candidates}) + "\n```"}
