"""Every side table coevo keeps beside a study, and how each one's rows of a study are purged.

coevo keeps rows of its own next to an Optuna study: worker claims and leases, round logs, the
knowledge base, cached LLM replies. When a study is deleted (``coevo runs delete``) they go
with it, and when a new study takes a deleted one's name they must not leak into it. This
module is the one list of them (:data:`SIDE_TABLES`): adding a side table is adding a line
here, and :func:`purge_side_tables` purges every one of them, whichever modules the process
happened to import.

The owners of two of them live in layers above ``search/`` (``knowledge/``, ``agent/``), which
this layer may not import; so each entry names its purge by ``module:function`` reference,
loaded when the purge runs (:func:`search.plugins.load_reference`), as the built-in problem
table names its problem classes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from coevo.search.plugins import load_reference

PurgeReason = Literal["new-study", "delete"]
"""Why side-table rows go: a new study took a deleted one's name, or ``coevo runs delete`` removes the study."""

Purge = Callable[[str | None, str, PurgeReason], str | None]
"""``(storage, study name, reason) -> note``: removes (or sets aside) a side table's rows of a study
by name; the note (None when there was nothing) says what went, in a few words ("12 claims")."""


@dataclass(frozen=True)
class SideTable:
    """One side table and its purge.

    Attributes:
        what: what the table holds, in a few words (``coevo runs delete`` names it).
        purge: ``module:function`` reference of its :data:`Purge`.
    """

    what: str
    purge: str

    def load(self) -> Purge:
        """The purge function (its module is imported now if it was not yet)."""
        purge: Purge = load_reference(self.purge, what=f"purge of the {self.what}")
        return purge


SIDE_TABLES: tuple[SideTable, ...] = (
    SideTable("worker claims, leases and worker rows", "coevo.search.workers:purge_coordination"),
    SideTable("round logs", "coevo.search.round_log:purge_round_logs"),
    SideTable("knowledge base", "coevo.knowledge.store:purge_knowledge"),
    SideTable("cached LLM replies", "coevo.agent.reasoners.cache:purge_replies"),
)
"""Every side table keyed by study name, in the order they are purged."""


def purge_side_tables(storage: str | None, study_name: str, reason: PurgeReason = "new-study") -> list[str]:
    """Run the purge of every table in :data:`SIDE_TABLES` for ``study_name``; returns their notes.

    Args:
        storage: the study storage URL (None: the default).
        study_name: the study whose rows go.
        reason: ``new-study`` (a new study took the name) or ``delete`` (``coevo runs delete``).
    """
    return [note for table in SIDE_TABLES if (note := table.load()(storage, study_name, reason))]
