"""When ``realloc`` changes the PE split over a stream of batches: the online change rules and the hindsight optimum.

Every batch ``t`` has a makespan ``spans[t][s]`` on each PE split ``s`` it is list-scheduled on (without the
reconfiguration), and running a batch on another split than the batch before it (the first batch: the start
split, the design's own) first costs ``cost`` cycles. A rule chooses the split of each batch; its total is the
sum of the makespans plus ``cost`` per change (:func:`path_cycles`). The functions here are pure: they take
the makespans, so the same code serves the scheduler (:func:`sim.fpga.sched.realloc_stream`), the figure's
sweep and the tests.

* ``myopic`` (:func:`myopic_path`, :data:`~sim.fpga.model.CHANGE_RULE`): per batch, the split of least
  makespan plus its charge among the batch's candidates and the held split (held first, so ties stay);
  a change is made only when this batch alone repays it.
* ``amortized`` (:class:`BreakEven`, :func:`amortized_path`): the deterministic rent-or-buy (ski-rental)
  break-even rule of Karlin, Manasse, Rudolph and Sleator, "Competitive snoopy caching", Algorithmica 3 (1988):
  hold the split; for every other split keep the cycles it would have saved over the held one on the batches
  since the last change; change to it once that saving reaches ``cost``.
* the hindsight optimum (:func:`hindsight_path`): dynamic programming (Viterbi) over the batches with
  ``cost`` as the transition cost, knowing every batch in advance: the least total of any sequence over
  the same splits, so a lower bound for every online rule that chooses among them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Split = tuple[int, int, int]


class BreakEven:
    """The ski-rental break-even change rule, online: one :meth:`step` per batch, in order.

    Counters: for each split ``s`` other than the held one, ``saving[s] = max(0, saving[s] + spans[held] -
    spans[s])`` per batch since the last change (a batch on which ``s`` is slower lowers its saving, never
    below 0). After the current batch's update, the splits with ``saving >= cost`` and ``saving > 0`` are due;
    if any is, the rule changes to the one with the largest saving (ties: the first offered) and the
    counters restart. The decision uses the current batch's makespans, which ``realloc`` has before it runs
    the batch (it list-schedules the candidates first), and none of later batches: the change applies from
    this batch on, which pays the cost. Guarantees: with one alternative split whose per-batch saving is
    never negative this is exactly the break-even rule, within 2 times the offline optimum (Karlin et
    al. 1988); with several splits and savings of either sign the problem is a metrical task system on a
    uniform metric, where no deterministic rule is better than ``2n - 1`` competitive for ``n`` splits
    (Borodin, Linial and Saks, J. ACM 39(4), 1992), so the ratio is measured (the figure's sweep) rather than
    promised. With ``cost == 0`` every positive saving is due at once, so the rule takes this batch's shortest
    split whenever it beats the held one: :func:`myopic_path`'s choice.

    Which splits it watches: the start split and every split offered so far (:meth:`offer`, the batches'
    candidates, in first-seen order); each :meth:`step` needs the current batch's makespan on all of them.
    """

    def __init__(self, start: Split, cost: int) -> None:
        self.held: Split = start
        self.cost = cost
        self.watched: list[Split] = [start]
        self.saving: dict[Split, int] = {}

    def offer(self, splits: Sequence[Split]) -> list[Split]:
        """Watch ``splits`` too (this batch's candidates); returns every watched split, whose makespans :meth:`step` needs."""
        self.watched += [s for s in dict.fromkeys(splits) if s not in self.watched]
        return list(self.watched)

    def step(self, spans: Mapping[Split, int]) -> Split:
        """The split to run this batch on, from its makespans on the watched splits (class doc)."""
        missing = [s for s in self.watched if s not in spans]
        if missing:
            raise ValueError(f"the batch's makespans lack the watched splits {missing}")
        base = spans[self.held]
        for s in self.watched:
            if s != self.held:
                self.saving[s] = max(0, self.saving.get(s, 0) + base - spans[s])
        due = [s for s in self.watched if s != self.held and self.saving[s] > 0 and self.saving[s] >= self.cost]
        if due:
            self.held = max(due, key=lambda s: self.saving[s])  # max keeps the first of equal savings
            self.saving.clear()
        return self.held


def myopic_path(spans: Sequence[Mapping[Split, int]], candidates: Sequence[Sequence[Split]], start: Split, cost: int) -> list[Split]:
    """``myopic``'s splits: per batch, the least makespan plus charge among the held split and the batch's candidates.

    The rule of :func:`sim.fpga.sched.schedule_batch`'s ``realloc`` on a table of makespans: with ``cost > 0`` the
    held split is tried first, then the candidates in order, and a later one wins only when strictly shorter with
    its charge; with ``cost == 0`` the held split is not a candidate unless it is among the batch's.
    """
    held, out = start, []
    for row, offered in zip(spans, candidates, strict=True):
        order = ([held] if cost > 0 else []) + [s for s in offered if cost == 0 or s != held]
        best, best_total = order[0], row[order[0]] + (cost if order[0] != held else 0)
        for s in order[1:]:
            total = row[s] + (cost if s != held else 0)
            if total < best_total:
                best, best_total = s, total
        held = best
        out.append(held)
    return out


def amortized_path(spans: Sequence[Mapping[Split, int]], candidates: Sequence[Sequence[Split]], start: Split, cost: int) -> list[Split]:
    """``amortized``'s splits (:class:`BreakEven`), each batch offering its candidates before the rule steps."""
    rule, out = BreakEven(start, cost), []
    for row, offered in zip(spans, candidates, strict=True):
        watched = rule.offer(offered)
        out.append(rule.step({s: row[s] for s in watched}))
    return out


def path_cycles(spans: Sequence[Mapping[Split, int]], path: Sequence[Split], start: Split, cost: int) -> int:
    """Total cycles of running batch ``t`` on ``path[t]``: the makespans plus ``cost`` per change (from ``start`` on)."""
    changes = sum(a != b for a, b in zip([start, *path[:-1]], path, strict=True))
    return sum(row[s] for row, s in zip(spans, path, strict=True)) + cost * changes


def hindsight_path(spans: Sequence[Mapping[Split, int]], start: Split, cost: int) -> tuple[int, list[Split]]:
    """The least total cycles of any split sequence over the splits every batch has a makespan on, and one such sequence.

    Viterbi over the batches: ``best[t][s] = spans[t][s] + min(best[t-1][s], min_r best[t-1][r] + cost)``, the first
    batch paying ``cost`` unless it runs on ``start``; O(batches x splits). Offline: it knows every batch in advance,
    so no online rule choosing among the same splits totals less. Ties go to staying, then to the first split.

    Raises:
        ValueError: no batch, or batches with makespans on different splits.
    """
    if not spans:
        raise ValueError("no batches: the hindsight optimum needs at least one batch's makespans")
    splits = list(spans[0])
    if any(set(row) != set(splits) for row in spans):
        raise ValueError("every batch needs a makespan on the same splits")
    best = {s: spans[0][s] + (cost if s != start else 0) for s in splits}
    back: list[dict[Split, Split]] = []
    for row in spans[1:]:
        leader = min(splits, key=lambda r: best[r])
        came = {s: s if best[s] <= best[leader] + cost else leader for s in splits}
        best = {s: row[s] + best[came[s]] + (cost if came[s] != s else 0) for s in splits}
        back.append(came)
    last = min(splits, key=lambda s: best[s])
    path = [last]
    for came in reversed(back):
        path.append(came[path[-1]])
    path.reverse()
    return best[last], path


__all__ = ["BreakEven", "Split", "amortized_path", "hindsight_path", "myopic_path", "path_cycles"]
