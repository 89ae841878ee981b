"""Knowledge base of design heuristics: claims with scope, evidence, confidence and status."""

from __future__ import annotations

from knowledge.heuristics import INACTIVE, Heuristic, KnowledgeBase, KnowledgeStore, StudyAttrStore

__all__ = ["INACTIVE", "Heuristic", "KnowledgeBase", "KnowledgeStore", "StudyAttrStore"]
