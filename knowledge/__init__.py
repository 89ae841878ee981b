"""Knowledge base of design heuristics: claims with scope, evidence, confidence and status.

* :mod:`knowledge.heuristics`: the heuristic record and the in-memory working copy.
* :mod:`knowledge.store`: the versioned store (SQLite or PostgreSQL), history and evidence.
* :mod:`knowledge.retrieval`: which heuristics a prompt carries, under a token budget.
* :mod:`knowledge.validation`: the validation loop (proposals citing a heuristic test it).
* :mod:`knowledge.exchange`: JSON-lines export and import.
* :mod:`knowledge.imported`: where imported heuristics came from, and whether they held where they were brought.
* :mod:`knowledge.report`: review reports; :mod:`knowledge.ablation`: counterfactual reruns.
"""

from __future__ import annotations

from coevo.knowledge.heuristics import HUMAN, INACTIVE, STATUSES, Heuristic, KnowledgeBase

__all__ = ["HUMAN", "INACTIVE", "STATUSES", "Heuristic", "KnowledgeBase"]
