"""The knowledge base as tools: ``kb.list``, ``kb.show`` and ``kb.review`` (an edit: chat confirms first)."""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar, Literal

from pydantic import Field

from coevo.knowledge.store import KnowledgeStore
from coevo.search.storage import DEFAULT_STORAGE
from coevo.tools._base import Target, Tool, ToolArgs, ToolResult

STORAGE = Field(None, description=f"study storage URL (the knowledge store is beside it); default {DEFAULT_STORAGE}")


class KBListArgs(ToolArgs):
    """Which knowledge base to list, and which of its heuristics."""

    study: str = Field(..., description="study name: each pelnas search keeps its own knowledge base")
    storage: str | None = STORAGE
    status: str | None = Field(None, description="only this status: proposed, validated, unhelpful, refuted, retired, accepted, rejected")
    limit: int = Field(50, ge=1, le=500, description="at most this many heuristics, most confident first")


class KBList(Tool):
    """Heuristics of a study's knowledge base."""

    name = "kb.list"
    description = (
        "List the heuristics (design rules learned from evidence) of a search's knowledge base: id, text, niche, "
        "confidence, status and support/refute evidence counts. Cite heuristics by id."
    )
    Args = KBListArgs
    example: ClassVar[dict[str, Any]] = {"study": "example", "limit": 5}
    reads: ClassVar[dict[str, Literal["storage"]]] = {"storage": "storage"}

    def run(self, args: KBListArgs) -> ToolResult:
        store = KnowledgeStore.for_storage(args.storage, create=False)
        store.spec(args.study)  # unknown knowledge base: a clear error listing the known ones
        counts = Counter((e.hid, e.kind) for e in store.evidence(args.study))
        rows: list[dict[str, Any]] = [
            {
                "id": v.hid,
                "text": v.text,
                "niche": v.scope.get("niche"),
                "confidence": round(v.confidence, 3),
                "status": v.status,
                "support": counts[(v.hid, "support")],
                "refute": counts[(v.hid, "refute")],
            }
            for v in store.latest(args.study).values()
            if args.status is None or v.status == args.status
        ]
        rows.sort(key=lambda r: -r["confidence"])
        return ToolResult(value={"study": args.study, "total": len(rows), "heuristics": rows[: args.limit]})


class KBShowArgs(ToolArgs):
    """The heuristic to show: its study and id."""

    study: str = Field(..., description="study name")
    id: str = Field(..., description="heuristic id, e.g. H17")
    storage: str | None = STORAGE


class KBShow(Tool):
    """One heuristic with its version history and evidence rows."""

    name = "kb.show"
    description = "Show one heuristic: its claim, structured form, every version (what changed, why, who) and its evidence trial ids."
    Args = KBShowArgs
    example: ClassVar[dict[str, Any]] = {"study": "example", "id": "H1"}
    reads: ClassVar[dict[str, Literal["storage"]]] = {"storage": "storage"}

    def run(self, args: KBShowArgs) -> ToolResult:
        store = KnowledgeStore.for_storage(args.storage, create=False)
        history = store.history(args.study, args.id)
        head = history[-1]
        evidence = store.evidence(args.study, args.id)
        return ToolResult(
            value={
                "id": head.hid,
                "text": head.text,
                "status": head.status,
                "confidence": head.confidence,
                "scope": head.scope,
                "structured": head.structured,
                "history": [v.summary() for v in history],
                "support_trials": sorted({e.trial for e in evidence if e.kind == "support"})[:100],
                "refute_trials": sorted({e.trial for e in evidence if e.kind == "refute"})[:100],
            }
        )


class KBReviewArgs(ToolArgs):
    """A review decision on one heuristic: accept, reject or retire it, and why."""

    study: str = Field(..., description="study name")
    id: str = Field(..., description="heuristic id, e.g. H17")
    decision: Literal["accepted", "rejected", "retired"] = Field(..., description="accepted, rejected (never in prompts again) or retired")
    why: str = Field(..., min_length=3, description="the reason, kept in the heuristic's history")
    storage: str | None = STORAGE


class KBReview(Tool):
    """Record a review decision on a heuristic (a new version; the user confirms first in chat)."""

    name = "kb.review"
    description = (
        "Propose a review decision on a heuristic: accept, reject (it never reaches a prompt again) or retire it, with a reason. "
        "This edits the knowledge base, so the user is asked to confirm before it runs."
    )
    Args = KBReviewArgs
    example: ClassVar[dict[str, Any]] = {"study": "example", "id": "H1", "decision": "accepted", "why": "checked against the datasheet"}
    writes: ClassVar[dict[str, Target]] = {"storage": "storage"}
    confirm = True

    def run(self, args: KBReviewArgs) -> ToolResult:
        # a review changes a heuristic that exists: a store that does not is an error, not created
        store = KnowledgeStore.for_storage(args.storage, create=False)
        review = store.review(args.study, args.id, args.decision, why=args.why, by="human (chat)")
        v = review.head
        messages = [] if review.recorded else [f"{v.hid} was already {v.status}: nothing recorded"]
        return ToolResult(value={"id": v.hid, "status": v.status, "version": v.version, "text": v.text}, messages=messages)
