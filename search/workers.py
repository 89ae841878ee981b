"""Many workers, one study: distributed, crash-safe searches on shared Optuna storage.

Every worker runs the same loop against the study's database (PostgreSQL across machines,
or SQLite on one machine); nothing but the database coordinates them:

* **Claims** (``coevo_claims``, one row per design point and study): before evaluating, a
  worker claims the point of its trial in one transaction that also checks the budget
  (claimed points < budget), holding the study's row lock in ``coevo_leases``. So no two
  workers evaluate the same point and the search ends with exactly ``budget`` paid
  evaluations. A trial whose point is claimed by a live trial is PRUNED (it costs nothing);
  one whose point is already evaluated is answered from that trial, as in a single run.
* **Rounds**: proposers that propose explicitly (the co-evolution engine) run a round only
  when no proposal is waiting; the ``round`` lease makes one worker the round's leader
  (knowledge update, proposals); the others keep evaluating waiting trials or wait. The
  lease expires if its holder dies, and the next leader resumes the same round number.
  Sampler proposers (random, TPE, NSGA-II) need no rounds: each worker asks its own
  sampler, seeded by its number in the study (taken atomically when it registers).
* **Crash safety**: Optuna heartbeats (``RDBStorage(heartbeat_interval, grace_period)``):
  a worker killed mid-trial leaves a RUNNING trial whose heartbeat stops; any worker fails
  it and re-queues a copy (``RetryHeartbeatStaleTrialCallback``); the copy takes over the dead
  trial's claim. A worker killed between failing a stale trial and enqueueing its copy
  leaves a claim no trial will finish; once the budget is claimed, a live worker enqueues
  that copy itself. SIGINT/SIGTERM stop the worker at once: an evaluation running then is
  abandoned, its trial failed as ``interrupted`` and re-queued (not paid), for a rerun.
* **Failed evaluations**: ``evaluate`` runs in a thread of its own under a deadline
  (:attr:`search.problem.Problem.eval_timeout_s`, ``--eval-timeout``). An evaluation that raises,
  returns a NaN, an infinity or no value for an objective, or runs past its deadline ends its
  trial FAIL with the reason in its ``failure`` attribute. It was paid for: its claim is marked
  evaluated, so it counts once against the budget, no worker evaluates the point again, and no
  sweep re-queues it (a FAIL trial *without* ``failure`` is one a dead worker left, and is).
  Past the deadline the trial's heartbeats stop. Python cannot stop a thread: an abandoned
  evaluation runs on in its daemon thread, result dropped, until the process exits.
* **Storage faults**: every wait on the database is bounded (:class:`search.storage.DatabaseTimeouts`,
  ``--db-timeout``: connect, statement, silence from the server, SQLite locks), so a refused,
  silent or dropped database ends each request with an error; transient ones
  (:mod:`search.db_errors`) are retried with backoff, and past ``patience_s`` (``--db-patience``)
  the worker stops with a message saying what happened and how to resume (nothing is lost:
  claims, trials and the knowledge base are all in the database). Permanent faults (a corrupt or
  read-only file, a wrong password, no such database, a full disk) stop it at once.

Clocks: lease expiry uses each worker's wall clock; machines should run NTP (seconds of
skew only delay a takeover, they never double-claim a point: claims are transactional).
"""

from __future__ import annotations

import contextvars
import copy as _copy
import datetime
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

import optuna
import sqlalchemy as sa
import sqlalchemy.exc
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.storages._rdb.models import TrialModel as _TRIALS  # its table, for counting trials by state in SQL
from optuna.trial import TrialState

try:
    # Study.tell is this, then a read of the told trial back (get_trial: one query per trial table, 6-7 statements) only to
    # return it; the worker drops that copy, so it calls what tell calls first: the same checks, sampler hook and write
    from optuna.study._tell import _tell_with_warning
except ImportError:  # pragma: no cover - an Optuna that moved it: the public tell (one read more per trial)
    _tell_with_warning = None  # type: ignore[assignment]

from coevo.search.coordination_tables import TAG_LEASE, claims, leases, metadata, release_lease, take_lease, workers
from coevo.search.db_errors import DatabaseFault, classify
from coevo.search.errors import CoevoError, EvaluationsFailingError, StorageError, UserInputError
from coevo.search.problem import Problem, invalid_values
from coevo.search.proposers import Evaluation, Proposal, Proposer, RoundContext
from coevo.search.side_tables import PurgeReason
from coevo.search.storage import DatabaseTimeouts, has_table, lock_row, open_storage, require_writable, side_engine
from coevo.search.study import ATTR_BUDGET, ATTR_ROUND, FAILURE, INTERRUPTED, OUTCOME_ATTRS, evaluations_from_study, failed_evaluation

log = logging.getLogger(__name__)
T = TypeVar("T")

TRANSIENT: tuple[type[BaseException], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.DisconnectionError,
    sqlalchemy.exc.TimeoutError,
    optuna.exceptions.StorageInternalError,
    ConnectionError,
)
"""Errors a database that is restarting, dropping connections or away raises (what it was is :func:`search.db_errors.classify`'s)."""
DATABASE_ERRORS: tuple[type[BaseException], ...] = (sqlalchemy.exc.SQLAlchemyError, *TRANSIENT)
"""Any error from the database, transient or not (for threads and last words that must not die of one)."""

LOST = "lost"
"""A worker row's state once another worker found it gone while the row said ``running``."""


def _transient(exc: BaseException, fault: DatabaseFault | None) -> bool:
    """Whether retrying ``exc`` (``fault``: its :func:`search.db_errors.classify`) may help: the fault's kind says
    (refused, no reply, dropped, locked...), else the exception's type."""
    if fault is not None and fault.kind != "error":
        return fault.transient
    # a driver error of no known kind (or none): retried when its type is one of an away database, as before.
    # open_storage wraps driver errors in StorageError; a StorageError of its own (no cause) is final
    return isinstance(exc, TRANSIENT) or (isinstance(exc, StorageError) and isinstance(exc.__cause__, TRANSIENT))


def with_database_retry(what: str, fn: Callable[[], T], *, patience_s: float, storage: str | None = None) -> T:
    """``fn()``, retried with backoff while the database is away, for at most ``patience_s`` seconds.

    Each try is bounded by the engines' :class:`search.storage.DatabaseTimeouts`, so the worker
    gives up at most one request's bound past ``patience_s``. Permanent faults are not retried.

    Args:
        what: what the worker was doing, for the message.
        fn: the request.
        patience_s: how long transient faults are retried.
        storage: the storage URL, to name the file or server in the message.

    Raises:
        StorageError: a permanent fault, or the database stayed away; the message says what
            happened and how to resume.
    """
    delay, since = 0.25, time.monotonic()
    while True:
        try:
            return fn()
        except Exception as exc:
            fault = classify(exc, storage)
            if not _transient(exc, fault):
                if fault is None or isinstance(exc, CoevoError):
                    raise
                raise StorageError(f"{fault.reason} (while {what}); this worker stopped: fix that, then rerun the same command") from exc
            away = time.monotonic() - since
            reason = fault.reason if fault is not None else f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            if away > patience_s:
                raise StorageError(
                    f"{reason}; the database has been away for {away:.0f} s while {what} (--db-patience {patience_s:g}), so this "
                    "worker stopped. Nothing is lost: rerun the same command (or `coevo worker`) when the database is back"
                ) from exc
            log.warning("database error while %s (%s); retrying in %.1f s", what, reason, delay)
            time.sleep(delay)
            delay = min(delay * 2, 4.0)


@dataclass(frozen=True)
class WorkerSettings:
    """Timing of a worker.

    Attributes:
        heartbeat_s: how often a running trial's heartbeat is recorded.
        grace_s: a RUNNING trial without a heartbeat for this long is failed and re-queued.
        patience_s: how long the database may stay away (transient faults are retried) before the worker stops.
        poll_s: sleep between checks while waiting for others.
        timeouts: the bound on each wait on the database (``--db-timeout``).
        broken_after: a worker whose first this many paid evaluations all failed stops
            (:class:`search.errors.EvaluationsFailingError`): an ``evaluate`` that fails every
            time (a typo, a missing file) would otherwise spend the whole budget on failures.
            Once one evaluation has succeeded, failures never stop the worker.
    """

    heartbeat_s: int = 5
    grace_s: int = 20
    patience_s: float = 60.0
    poll_s: float = 0.2
    timeouts: DatabaseTimeouts = field(default_factory=DatabaseTimeouts)
    broken_after: int = 5

    def __post_init__(self) -> None:
        """Refuse timing no worker can keep (the messages name the flags of ``coevo search`` and ``coevo worker``).

        Raises:
            UserInputError: a heartbeat not above 0, a grace not above the heartbeat (a live trial would be
                taken for a dead one), a negative patience, or a database request bound under a second.
        """
        # written as "not (x > bound)": a NaN fails every comparison, so it is refused too (a NaN grace would never find
        # a silent worker gone); infinity is refused where a finite wait is the point
        if not (math.isfinite(self.heartbeat_s) and self.heartbeat_s > 0) or not (
            math.isfinite(self.grace_s) and self.grace_s > self.heartbeat_s
        ):
            raise UserInputError(f"need --heartbeat > 0 and --grace > --heartbeat (got {self.heartbeat_s} and {self.grace_s})")
        if not self.patience_s >= 0:
            raise UserInputError(f"--db-patience must be >= 0 seconds, got {self.patience_s}")
        if not (math.isfinite(self.timeouts.request_s) and self.timeouts.request_s >= 1):
            raise UserInputError(f"--db-timeout must be a number of seconds >= 1, got {self.timeouts.request_s}")


@dataclass
class WorkerResult:
    """What one worker did."""

    worker: str
    evaluated: int = 0
    failed: int = 0
    """Paid evaluations that failed (NaN, an exception, no value, a timeout): counted against the budget."""
    answered: int = 0
    pruned: int = 0
    rounds_led: int = 0
    requeued_seen: int = 0
    wall_s: float = 0.0
    stopped: str | None = None
    outages: list[float] = field(default_factory=list)


def _trials_in_state(study_id: int, state: TrialState) -> sa.Select[int]:
    """The count of Optuna study ``study_id``'s trials in ``state``, as a select on Optuna's trials table."""
    table = _TRIALS.__table__
    return sa.select(sa.func.count()).select_from(table).where(table.c.study_id == study_id, table.c.state == state)


class Coordination:
    """coevo's coordination tables on the study's database."""

    def __init__(self, storage: str | None, study: str, timeouts: DatabaseTimeouts | None = None, *, create: bool = True) -> None:
        self.engine = side_engine(storage, metadata, timeouts=timeouts, create=create)
        self.study = study
        self.create = create

    # ------------------------------------------------------------ leases

    def try_lease(self, name: str, owner: str, ttl_s: float) -> bool:
        """Take (or renew) lease ``name`` unless another owner holds an unexpired one."""
        return take_lease(self.engine, self.study, name, owner, ttl_s)

    def release(self, name: str, owner: str) -> None:
        """Give lease ``name`` back (only its owner can)."""
        release_lease(self.engine, self.study, name, owner)

    def _lock_study(self, conn: sa.Connection) -> None:
        # the study's "claims" row is the mutex of the claim transaction
        lock_row(conn, leases, {"study": self.study, "name": "claims"}, touch="expires_at", defaults={"owner": None, "expires_at": 0.0})

    # ------------------------------------------------------------ claims

    def claim(self, point_id: str, trial: int, budget: int, holder_state: Callable[[int], TrialState | None]) -> tuple[str, int | None]:
        """Claim ``point_id`` for ``trial``.

        ``holder_state`` gives the state of the trial holding the claim; a holder that is COMPLETE
        (told) is settled: its claim is marked evaluated. The worker's reads a failed evaluation
        as COMPLETE (:meth:`Worker._holder_state`), so a failed point is settled, not taken over.

        Returns:
            ``("new", None)`` claimed within the budget; ``("takeover", old)`` the previous
            claimant failed; ``("done", n)`` trial ``n`` already evaluated it (or its evaluation
            failed); ``("busy", n)`` live trial ``n`` is evaluating it; ``("full", None)`` the
            budget is claimed.
        """
        # The first try goes straight to the transaction: most claims are of new points (no row) or need no holder state
        # (the row is done, or this trial's), and those are decided in it alone; reading the row before it every time cost
        # a transaction more per claim. Only a row held by another, unfinished trial needs ``looked``: a second try.
        looked = False
        seen: Any = None
        while True:
            state = None
            if looked:
                # the holder's trial state is read before the claim transaction: on SQLite every
                # transaction holds the write lock, so Optuna's own read must not run inside it
                seen = self._claim_row(point_id)
                state = holder_state(int(seen.trial)) if seen is not None and not seen.done and seen.trial != trial else None
            with self.engine.begin() as conn:
                self._lock_study(conn)
                row = conn.execute(sa.select(claims).where(claims.c.study == self.study, claims.c.point_id == point_id)).first()
                if looked and (
                    (row is None) != (seen is None)
                    or (row is not None and seen is not None and (row.trial, row.done) != (seen.trial, seen.done))
                ):
                    continue  # changed under us: look again
                if row is None:
                    n = conn.execute(sa.select(sa.func.count()).select_from(claims).where(claims.c.study == self.study)).scalar_one()
                    if n >= budget:
                        return "full", None
                    conn.execute(claims.insert().values(study=self.study, point_id=point_id, trial=trial, done=False))
                    return "new", None
                if row.trial == trial:
                    return "new", None  # a retried claim after a dropped connection
                if row.done:
                    return "done", int(row.trial)
                if not looked:
                    looked = True
                    continue  # held by another trial: its state is read outside a transaction, then the row again
                if state == TrialState.COMPLETE:  # told, but its worker died before recording it
                    conn.execute(claims.update().where(claims.c.study == self.study, claims.c.point_id == point_id).values(done=True))
                    return "done", int(row.trial)
                if state in (TrialState.RUNNING, TrialState.WAITING):
                    return "busy", int(row.trial)
                conn.execute(claims.update().where(claims.c.study == self.study, claims.c.point_id == point_id).values(trial=trial))
                return "takeover", int(row.trial)

    def _claim_row(self, point_id: str) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(claims).where(claims.c.study == self.study, claims.c.point_id == point_id)).first()

    def _finished(self, point_id: str, trial: int) -> sa.Update:
        """The statement marking ``trial``'s claim on ``point_id`` evaluated."""
        return claims.update().where(claims.c.study == self.study, claims.c.point_id == point_id, claims.c.trial == trial).values(done=True)

    def finish(self, point_id: str, trial: int) -> None:
        """Mark ``trial``'s claim on ``point_id`` evaluated."""
        with self.engine.begin() as conn:
            conn.execute(self._finished(point_id, trial))

    def finish_and_count(self, point_id: str, trial: int, study_id: int) -> tuple[int, int, int]:
        """:meth:`finish`, then :meth:`counts_and_waiting` in the same transaction: what the worker's next step reads
        first, taken where the write already is (a transaction less per paid evaluation)."""
        with self.engine.begin() as conn:
            conn.execute(self._finished(point_id, trial))
            return self._counts_and_waiting(conn, study_id)

    def _claim_counts(self) -> tuple[Any, Any]:
        """(claimed points, evaluated points) of the study, as columns of one select."""
        return sa.func.count(), sa.func.coalesce(sa.func.sum(sa.case((claims.c.done, 1), else_=0)), 0)

    def counts(self) -> tuple[int, int]:
        """(claimed points, evaluated points)."""
        with self.engine.connect() as conn:
            total, done = conn.execute(sa.select(*self._claim_counts()).where(claims.c.study == self.study)).one()
        return int(total), int(done)

    def counts_and_waiting(self, study_id: int) -> tuple[int, int, int]:
        """(claimed points, evaluated points, WAITING trials of Optuna study ``study_id``) in one statement.

        A worker's every step needs all three (:meth:`Worker._step`); read apart they were two transactions. The trials
        table is Optuna's, in the same database as the claims.
        """
        with self.engine.connect() as conn:
            return self._counts_and_waiting(conn, study_id)

    def _counts_and_waiting(self, conn: sa.Connection, study_id: int) -> tuple[int, int, int]:
        waiting = _trials_in_state(study_id, TrialState.WAITING).scalar_subquery()
        total, done, n = conn.execute(sa.select(*self._claim_counts(), waiting).where(claims.c.study == self.study)).one()
        return int(total), int(done), int(n)

    def open_claims(self) -> list[tuple[str, int]]:
        """(point id, trial number) of every claim not yet evaluated."""
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(claims.c.point_id, claims.c.trial).where(claims.c.study == self.study, ~claims.c.done)).all()
        return [(str(point_id), int(trial)) for point_id, trial in rows]

    def holders(self) -> set[int]:
        """Trial numbers holding a claim."""
        with self.engine.connect() as conn:
            return {int(r.trial) for r in conn.execute(sa.select(claims.c.trial).where(claims.c.study == self.study))}

    def seen(self) -> set[str]:
        """Every claimed point id."""
        with self.engine.connect() as conn:
            return {r.point_id for r in conn.execute(sa.select(claims.c.point_id).where(claims.c.study == self.study))}

    # ------------------------------------------------------------ workers

    def register(self, worker: str) -> int:
        """Record a starting worker; returns its number in the study (1 for the first, in order of registration).

        The number is read and the row written under the study's lock, so workers started at the
        same moment get different numbers (and so different sampler seeds).
        """
        now = time.time()
        with self.engine.begin() as conn:
            self._lock_study(conn)
            conn.execute(workers.delete().where(workers.c.study == self.study, workers.c.worker == worker))
            before = conn.execute(sa.select(sa.func.count()).select_from(workers).where(workers.c.study == self.study)).scalar_one()
            conn.execute(
                workers.insert().values(
                    study=self.study,
                    worker=worker,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                    started_at=now,
                    last_seen=now,
                    state="running",
                    evaluations=0,
                )
            )
        return int(before) + 1

    def unregister(self, worker: str) -> None:
        """Remove a worker's row (one that failed before it ran)."""
        with self.engine.begin() as conn:
            conn.execute(workers.delete().where(workers.c.study == self.study, workers.c.worker == worker))

    def beat(self, worker: str, evaluations: int, state: str = "running", note: str | None = None) -> None:
        """Update a worker's liveness row."""
        with self.engine.begin() as conn:
            conn.execute(
                workers.update()
                .where(workers.c.study == self.study, workers.c.worker == worker)
                .values(last_seen=time.time(), evaluations=evaluations, state=state, note=note)
            )

    def mark_lost(self, worker: str, last_seen: float, reason: str = "no heartbeat, or its process ended") -> None:
        """Say in a worker's row that it is gone without stopping (killed, its machine down): state ``lost``.

        Only a row that still says ``running`` and has not beaten since ``last_seen`` (the value
        its reader judged; ``math.inf`` for a process certainly gone) changes: a worker that
        stopped, finished or beat in the meantime keeps its own word. The note is :func:`lost_note`'s.
        """
        with self.engine.begin() as conn:
            conn.execute(
                workers.update()
                .where(workers.c.study == self.study, workers.c.worker == worker, workers.c.state == "running")
                .where(workers.c.last_seen <= last_seen)
                .values(state=LOST, note=lost_note(reason))
            )

    def release_all(self, owner: str) -> int:
        """Give back every lease ``owner`` holds: only for an owner certainly gone (:func:`settle_dead_worker`); how many."""
        with self.engine.begin() as conn:
            done = conn.execute(leases.update().where(leases.c.study == self.study, leases.c.owner == owner).values(owner=None))
        return int(done.rowcount or 0)

    def workers(self) -> list[dict[str, Any]]:
        """Every worker row of the study (none when a reader finds no table: nothing is created)."""
        if not self.create and not has_table(self.engine, workers.name):
            return []
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(workers).where(workers.c.study == self.study).order_by(workers.c.started_at)).all()
        return [dict(r._mapping) for r in rows]


def purge_coordination(storage: str | None, study: str, reason: PurgeReason) -> str | None:
    """Remove the claims, leases and worker rows of ``study`` (listed in :data:`search.side_tables.SIDE_TABLES`)."""
    engine = side_engine(storage, metadata)
    try:
        with engine.begin() as conn:
            n = conn.execute(claims.delete().where(claims.c.study == study)).rowcount or 0
            # not the tag lease: the search that created the study holds it while it tags (search.study._tag_once)
            conn.execute(leases.delete().where(leases.c.study == study, leases.c.name != TAG_LEASE))
            conn.execute(workers.delete().where(workers.c.study == study))
    finally:
        engine.dispose()
    return f"{n} claims" if n else None


def heartbeat_storage(url: str | None, settings: WorkerSettings) -> optuna.storages.RDBStorage:
    """The study storage with Optuna heartbeats and re-queueing of failed trials (a worker writes: it must be writable)."""
    require_writable(url)
    with _quiet_optuna():
        return open_storage(
            url,
            timeouts=settings.timeouts,
            heartbeat_interval=settings.heartbeat_s,
            grace_period=settings.grace_s,
            heartbeat_stale_trial_callback=_REQUEUE_ANY,  # the one made at import (below), as the sweeps use
        )


EVALUATION_THREAD = "coevo-evaluate"
"""The name of the thread each evaluation runs in; the ``coevo`` command ends at once while an abandoned one still runs."""

ENV_WORKER_TAG = "COEVO_WORKER_TAG"
"""The last part of a worker's name, given by the search that starts it (``coevo search --workers N``), so that search
knows the name of each worker it started: when one dies, it hands over exactly that worker's holdings (a pid alone
could name another machine's worker where hosts share a name)."""


def worker_name(pid: int, tag: str | None = None) -> str:
    """``<host>-<pid>-<tag>``: ``tag`` as given (hex, 6 to 32 characters), else a random one."""
    if tag is None or not (6 <= len(tag) <= 32 and all(c in "0123456789abcdef" for c in tag)):
        tag = uuid.uuid4().hex[:6]
    return f"{socket.gethostname()}-{pid}-{tag}"


@contextmanager
def _quiet_optuna() -> Iterator[None]:
    # heartbeats are flagged experimental, and Optuna warns that they are meant for
    # Study.optimize; ask/tell with our own heartbeat thread is what we intend
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
        yield


@dataclass
class Progress:
    """What a progress display needs after each evaluation.

    Attributes:
        queries: paid evaluations of the study so far (every worker's).
        budget: the study's budget.
        trials: trials of the study as this worker last counted them.
        hv_ratio: HV ratio of the paid evaluations this worker knows of (all of them in a
            single-process search; refreshed each round it leads otherwise, and at its end), or
            None when the problem has no exact front or scores only its final front.
        idle: nothing was left to evaluate, so no worker ran (a rerun of a finished search): a
            display shows nothing for it rather than a count that never moved.
    """

    queries: int
    budget: int
    trials: int
    hv_ratio: float | None
    idle: bool = False


MAX_TRIALS_PER_QUERY = 20
"""Stop after this many trials per budgeted query: a sampler stuck re-proposing seen points."""


@dataclass(frozen=True)
class _Outcome:
    """How one evaluation ended: values (a result), a failure (paid), or an interruption (not paid)."""

    values: dict[str, float] | None = None
    failure: str | None = None
    traceback: str | None = None
    interrupted: str | None = None


class _Evaluation:
    """One ``problem.evaluate(point)`` call in a daemon thread of its own, so the worker can stop waiting for it.

    Python cannot kill a thread: an evaluation the worker abandons (past its deadline, or at a
    stop) runs on until it returns, its result dropped; being a daemon thread it does not keep
    the process alive, and it ends when the process exits. The call runs in a copy of the
    caller's context (:mod:`contextvars`), so progress listeners reach it.
    """

    def __init__(self, problem: Problem, point: Any) -> None:
        self.done = threading.Event()
        self._values: Any = None
        self._error: BaseException | None = None
        context = contextvars.copy_context()
        thread = threading.Thread(target=context.run, args=(self._call, problem, point), name=EVALUATION_THREAD, daemon=True)
        thread.start()

    def _call(self, problem: Problem, point: Any) -> None:
        try:
            self._values = problem.evaluate(point)
        except BaseException as exc:  # whatever user code raises fails its trial, nothing else
            self._error = exc
        finally:
            self.done.set()

    def outcome(self, problem: Problem) -> _Outcome:
        """The finished call's outcome: its values when they are a result, else why it failed."""
        if self._error is not None:
            exc, self._error = self._error, None  # the traceback holds the evaluation's frames: let them go
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            text = "".join(traceback.format_exception(exc))[-4000:]
            return _Outcome(failure=f"evaluate raised {type(exc).__name__}" + (f": {first}" if first else ""), traceback=text)
        why = invalid_values(problem, self._values)
        if why is not None:
            return _Outcome(failure=why)
        return _Outcome(values={o.name: float(self._values[o.name]) for o in problem.objectives})


class _RequeueStale(RetryHeartbeatStaleTrialCallback):
    """Optuna's re-queueing of a failed trial (its copy WAITING, the same point), coevo's way.

    A trial whose evaluation failed (:func:`search.study.failed_evaluation`: it fell silent after
    its failure was recorded) is settled and paid, never re-queued; the copy of any other does
    not inherit how its original ended (:data:`search.study.OUTCOME_ATTRS`).
    """

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        if failed_evaluation(trial):
            return
        copy = _copy.copy(trial)
        copy.user_attrs = {k: v for k, v in trial.user_attrs.items() if k not in OUTCOME_ATTRS}
        super().__call__(study, copy)


def _requeue_any() -> _RequeueStale:
    with _quiet_optuna():  # Optuna marks the callback experimental
        return _RequeueStale(max_retry=None)


_REQUEUE_ANY = _requeue_any()
"""One re-queueing callback (it holds no state), made at import: making one warns, and a warning filter set in the
watcher thread (``warnings.catch_warnings``) would change the whole process's warnings while it runs."""


def fail_and_requeue(rdb: optuna.storages.RDBStorage, study: optuna.Study, study_id: int, number: int) -> bool:
    """Fail RUNNING trial ``number`` and enqueue its copy, as Optuna does with a stale trial (the copy takes its claim
    over); True when this call failed it (False: another worker got there first).

    A trial whose failed evaluation was recorded before its worker died is only failed (:class:`_RequeueStale`).
    """
    trial_id = rdb.get_trial_id_from_study_id_trial_number(study_id, number)
    try:
        if rdb.set_trial_state_values(trial_id, state=TrialState.FAIL):
            _REQUEUE_ANY(study, rdb.get_trial(trial_id))
            return True
    except optuna.exceptions.UpdateFinishedTrialError:
        pass  # another worker failed it first (as stale)
    return False


@dataclass
class _LedRound:
    """A round this worker proposed, kept until its results are in (for ``Proposer.observe``)."""

    ctx: RoundContext
    rejected: list[tuple[Proposal, str]]


class Worker:
    """One worker's loop (see the module doc); a single-process search is one worker.

    Args:
        problem: the study's problem.
        proposer: the study's proposer.
        storage: the storage URL.
        study_name: the (existing) study.
        seed: the study's seed; the first worker's sampler uses it, later ones ``seed * 1000 + n``.
        settings: timing.
        on_progress: called after every paid evaluation of this worker.
        eval_timeout_s: seconds one evaluation may take before its trial fails as timed out;
            None: the problem's :attr:`~search.problem.Problem.eval_timeout_s`.
    """

    def __init__(
        self,
        problem: Problem,
        proposer: Proposer,
        *,
        storage: str | None,
        study_name: str,
        seed: int,
        settings: WorkerSettings | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        eval_timeout_s: float | None = None,
    ) -> None:
        self.problem = problem
        self.eval_timeout_s = float(eval_timeout_s if eval_timeout_s is not None else problem.eval_timeout_s)
        self.proposer = proposer
        self.storage = storage
        self.settings = settings or WorkerSettings()
        self.seed = seed
        self.name = worker_name(os.getpid(), os.environ.get(ENV_WORKER_TAG))
        self.on_progress = on_progress
        self.stop = threading.Event()
        self.result = WorkerResult(self.name)
        self._current: int | None = None  # trial id being evaluated (for heartbeats)
        self._deadline = math.inf  # of the evaluation running: no heartbeat past it
        self._abandoned: list[_Evaluation] = []  # evaluations given up on whose threads may still run
        self._interrupted: str | None = None
        self._leases: set[str] = set()
        self._last_sweep = 0.0
        self._last_repair = 0.0
        self._finished_at: float | None = None
        self._led: _LedRound | None = None
        self._found: tuple[list[float], list[float]] = ([], [])  # paid values known here, for the progress HV
        self._asked = 0
        self._done = 0
        self._counts: tuple[int, int, int] | None = None  # (claimed, evaluated, waiting) read with the last claim's finish
        patience = self.settings.patience_s
        self.coord = with_database_retry(
            "connecting", lambda: Coordination(storage, study_name, self.settings.timeouts), patience_s=patience, storage=storage
        )
        self.heart = with_database_retry(
            "connecting", lambda: heartbeat_storage(storage, self.settings), patience_s=patience, storage=storage
        )
        try:  # the study first: joining a study that is not there writes nothing
            self.study_id = with_database_retry(
                "loading the study", lambda: self.heart.get_study_id_from_name(study_name), patience_s=patience, storage=storage
            )
        except KeyError:
            raise UserInputError(f"no study {study_name!r} to join; start it with `coevo search ... --study {study_name}`") from None
        # registered here, not first in run(): the number must be taken atomically before the sampler is
        # seeded, or workers started together all read "no workers yet", share one seed and propose the
        # same points in the same order (each then waits on or answers the other's claims: half the rate).
        # A retry after a commit whose reply was lost can still repeat a number another worker took
        # meanwhile (the number is not stored); two workers then share a seed, which costs rate, not results.
        number = with_database_retry("registering", lambda: self.coord.register(self.name), patience_s=patience, storage=storage)
        self.sampler_seed = seed if number == 1 else seed * 1000 + number  # a lone search samples exactly as its seed says
        try:
            self._load(study_name, proposer.sampler(problem, self.sampler_seed))
            self.max_trials = MAX_TRIALS_PER_QUERY * self.budget + 100
            self._reference = problem.reference() if on_progress is not None and problem.found_set == "all" else None
        except BaseException:
            with suppress(*DATABASE_ERRORS):  # a worker that never ran leaves no row claiming it runs
                self.coord.unregister(self.name)
            raise

    def _load(self, study_name: str, sampler: optuna.samplers.BaseSampler) -> None:
        """Load the study with this worker's sampler, its budget and its trial count (reads retried like any)."""
        patience, storage = self.settings.patience_s, self.storage
        self.study = with_database_retry(
            "loading the study",
            lambda: optuna.load_study(study_name=study_name, storage=self.heart, sampler=sampler),
            patience_s=patience,
            storage=storage,
        )
        self.budget = with_database_retry(
            "loading the study", lambda: int(self.study.user_attrs.get(ATTR_BUDGET, 0)), patience_s=patience, storage=storage
        )
        self._trials_at_start = with_database_retry(
            "loading the study", lambda: int(self.heart.get_n_trials(self.study_id)), patience_s=patience, storage=storage
        )

    # ------------------------------------------------------------ resilience

    def _retry(self, what: str, fn: Callable[[], T]) -> T:
        started = time.monotonic()
        failures: list[int] = []

        def attempt() -> T:
            try:
                return fn()
            except TRANSIENT:
                failures.append(1)
                raise

        value = with_database_retry(what, attempt, patience_s=self.settings.patience_s, storage=self.storage)
        if failures:
            self.result.outages.append(round(time.monotonic() - started, 3))
        return value

    @contextmanager
    def _heartbeat(self) -> Iterator[None]:
        def beat() -> None:
            while not done.wait(self.settings.heartbeat_s):
                try:
                    if self._current is not None and time.monotonic() < self._deadline:  # none past the deadline
                        self.heart.record_heartbeat(self._current)
                    for name in list(self._leases):
                        self.coord.try_lease(name, self.name, 3 * self.settings.grace_s)
                    self.coord.beat(self.name, self.result.evaluated + self.result.failed)
                except DATABASE_ERRORS:
                    pass  # the main loop notices the fault and applies the patience (or stops, if it is permanent)

        done = threading.Event()
        thread = threading.Thread(target=beat, name="coevo-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            # a worker that stops on an error (the database away) does not wait for a beat stuck in the database
            thread.join(timeout=5 if sys.exc_info()[0] is None else 0.5)

    # ------------------------------------------------------------ the loop

    def run(self) -> WorkerResult:
        """Work until the study's budget is evaluated, a stop is asked, or the database stays away.

        The first SIGINT/SIGTERM stops the worker: an evaluation running then is abandoned, its
        trial failed as ``interrupted`` and re-queued (not paid: a rerun evaluates it); a second
        SIGINT interrupts whatever runs at once (``KeyboardInterrupt``). Either way a rerun resumes.
        """
        started = time.perf_counter()
        self._retry("registering", lambda: self.coord.register(self.name))
        restore = _stop_on_signals(self.stop)
        state: str = "stopped"
        note: str | None = "interrupted"
        database_away = False
        try:
            with self._heartbeat(), _quiet_optuna():
                self._retry("cleaning up after dead workers", self._fail_trials_of_dead_workers)
                if self.on_progress is not None:
                    self._refresh_found(evaluations_from_study(self.problem, self.study))
                while not self.stop.is_set():
                    if not self._retry("working", self._step):
                        break
                if self._led is not None:
                    self._retry("observing", lambda: self._observe_led(evaluations_from_study(self.problem, self.study)))
                if self.on_progress is not None:
                    self._retry("reporting", self._report_final)
            if self.stop.is_set():
                state, note = (
                    "stopped",
                    "stopped by a signal "
                    + ("during an evaluation, re-queued for a rerun (not paid)" if self._interrupted else "between evaluations"),
                )
                self.result.stopped = note
            else:
                state, note = "finished", self.result.stopped
        except CoevoError as exc:
            state, note = "failed", str(exc)
            self.result.stopped = note
            database_away = isinstance(exc, StorageError)
            raise
        finally:
            restore()
            self.result.wall_s = time.perf_counter() - started
            if not database_away:  # a last word, if the database takes it (one that is away would only hold the exit up)
                with suppress(*DATABASE_ERRORS):
                    self.coord.beat(self.name, self.result.evaluated + self.result.failed, state, note)
        return self.result

    def _step(self) -> bool:
        """One unit of work; False when the budget is evaluated (or the proposer is stuck)."""
        # one read, not two: every step takes it; after a paid evaluation, the one its claim's write took (_pay)
        counts, self._counts = self._counts, None
        total, done, waiting = counts or self.coord.counts_and_waiting(self.study_id)
        self._done = done
        if done >= self.budget:
            return self._wind_down()
        if time.monotonic() - self._last_sweep > self.settings.heartbeat_s:
            self._sweep_dead_trials()
            waiting = self._waiting()  # the sweep may have re-queued trials: counted after it, as always
        explicit = self.proposer.explicit
        if total >= self.budget and not waiting:
            # the last claims are being evaluated, will be re-queued, or were told by a worker
            # that died before recording them
            if time.monotonic() - self._last_repair > self.settings.heartbeat_s:
                self._last_repair = time.monotonic()
                self._repair_claims()
            time.sleep(self.settings.poll_s)
            return True
        if explicit and not waiting:
            if not self._lead_round():
                time.sleep(self.settings.poll_s)  # another worker leads this round
                return True
            if self._waiting():
                return True
            # the round proposed nothing valid: one sampler-chosen trial, as the single-process runner does
        if self._trials_at_start + self._asked >= self.max_trials:
            n = int(self.heart.get_n_trials(self.study_id))
            if n >= self.max_trials:
                self.result.stopped = f"stopped after {n} trials: the proposer keeps re-proposing evaluated points"
                return False
        self._evaluate_one()
        return True

    def _wind_down(self) -> bool:
        """After the budget: resolve what dead workers left (re-queued copies, silent trials), then stop.

        Copies waiting in the queue are asked and pruned (the budget is spent); RUNNING trials
        of dead workers are failed once stale. Live workers' last trials end by themselves.
        Waits at most two grace periods, so a finished search never hangs on a dead worker.
        A budget raised meanwhile (a rerun with a larger ``--budget``) puts the worker back to work.
        """
        if self._finished_at is None:
            self.budget = int(self.study.user_attrs.get(ATTR_BUDGET, self.budget))
            self.max_trials = MAX_TRIALS_PER_QUERY * self.budget + 100
            if self.coord.counts()[1] < self.budget:
                return True
        self._finished_at = self._finished_at or time.monotonic()
        if self._waiting():
            self._evaluate_one()
            return True
        running = self._count(TrialState.RUNNING)
        if not running or time.monotonic() - self._finished_at > 2 * self.settings.grace_s + self.settings.heartbeat_s:
            return False
        if time.monotonic() - self._last_sweep > self.settings.heartbeat_s:
            self._sweep_dead_trials()
        time.sleep(self.settings.poll_s)
        return True

    def _fail_trials_of_dead_workers(self) -> None:
        """At start: fail and re-queue the RUNNING trials whose worker is certainly gone.

        A worker is gone when its row says it stopped or failed, when it was last seen more
        than a grace period ago, or when it ran on this host under a pid that no longer exists
        (a killed search rerun at once). Trials that name no worker (left by a process killed
        between ``ask`` and tagging its trial, or by coevo before 0.2) are failed only when no
        other worker is alive; otherwise the regular sweep takes them once they are old. The rows
        of gone workers that still say ``running`` are marked :data:`LOST`.
        """
        others = [w for w in self.coord.workers() if w["worker"] != self.name]
        alive = {w["worker"] for w in others if worker_alive(w, self.settings.grace_s)}
        for w in others:
            if w["state"] == "running" and w["worker"] not in alive:
                self.coord.mark_lost(w["worker"], float(w["last_seen"]), why_gone(w, self.settings.grace_s) or "its process ended")
        for t in self.heart.get_all_trials(self.study_id, deepcopy=False, states=(TrialState.RUNNING,)):
            owner = t.user_attrs.get("worker")
            if not ((owner is None and alive) or owner in alive):
                self._fail_and_requeue(t.number)

    def _sweep_dead_trials(self) -> None:
        """Fail and re-queue the RUNNING trials of dead workers.

        Optuna fails trials whose heartbeat went stale. A worker killed between ``ask`` and
        its first heartbeat leaves a RUNNING trial with no heartbeat, which Optuna never
        considers stale: such a trial (older than two grace periods and holding no claim)
        is failed and re-queued here the same way.
        """
        self._last_sweep = time.monotonic()
        optuna.storages.fail_stale_trials(self.study)
        limit = datetime.datetime.now() - datetime.timedelta(seconds=2 * self.settings.grace_s)
        holders = self.coord.holders()
        for t in self.heart.get_all_trials(self.study_id, deepcopy=False, states=(TrialState.RUNNING,)):
            if t.number not in holders and t.datetime_start is not None and t.datetime_start <= limit:
                self._fail_and_requeue(t.number)

    def _fail_and_requeue(self, number: int) -> None:
        """:func:`fail_and_requeue` of RUNNING trial ``number`` of this worker's study."""
        fail_and_requeue(self.heart, self.study, self.study_id, number)

    def _repair_claims(self) -> None:
        """Settle the open claims that no live trial will finish.

        Two ways a dead worker leaves one: it told its trial COMPLETE but died before marking
        the claim evaluated (marked here), or it failed a stale trial and died before enqueueing
        the copy (the copy is enqueued here, and takes the claim over as a re-queued copy would).
        Called only when the budget is claimed and nothing waits, so no other trial can free
        the claim. A copy that races another worker's is harmless: the claim lets one evaluate
        and the other is skipped. A trial whose evaluation failed is settled like a complete
        one (its claim is marked evaluated, it is never re-queued).
        """
        settled = datetime.datetime.now() - datetime.timedelta(seconds=self.settings.heartbeat_s)
        for point_id, number in self.coord.open_claims():
            trial = self._trial(number)
            if trial is None:
                continue
            if trial.state == TrialState.COMPLETE or failed_evaluation(trial):
                self.coord.finish(point_id, number)
            elif trial.state == TrialState.FAIL and trial.datetime_complete is not None and trial.datetime_complete < settled:
                # failed at least a heartbeat ago: its sweeper had time to enqueue the copy and did not
                log.warning("trial %d holds the claim on %s but failed with no re-queued copy; re-queueing it", number, point_id)
                _REQUEUE_ANY(self.study, trial)

    def _waiting(self) -> int:
        return self._count(TrialState.WAITING)

    def _count(self, state: TrialState) -> int:
        """Trials of the study in ``state``, counted in SQL (Optuna's ``get_n_trials`` loads every such trial)."""
        with self.heart.engine.connect() as conn:
            return int(conn.execute(_trials_in_state(self.study_id, state)).scalar_one())

    def _lead_round(self) -> bool:
        """Run one co-evolution round if this worker gets the round lease; True if it did."""
        if not self.coord.try_lease("round", self.name, 3 * self.settings.grace_s):
            return False
        self._leases.add("round")
        try:
            if self._waiting():
                return True  # another leader just enqueued this round
            round_no = int(self.study.user_attrs.get(ATTR_ROUND, 0))
            evaluations = evaluations_from_study(self.problem, self.study)
            self._observe_led(evaluations)
            if self.on_progress is not None:
                self._refresh_found(evaluations)
            seen = self.coord.seen() | {e.point_id for e in evaluations}
            total, _ = self.coord.counts()
            ctx = RoundContext(
                self.problem, self.study, round_no, tuple(evaluations), frozenset(seen), self.budget - total, self.seed, self.storage
            )
            batch: set[str] = set()
            rejected: list[tuple[Proposal, str]] = []
            for prop in self.proposer.propose(ctx):
                if prop.error:
                    rejected.append((prop, prop.error))
                    continue
                pid = self.problem.point_id(prop.point)
                if pid in seen or pid in batch:
                    rejected.append((prop, "already evaluated" if pid in seen else "duplicate in this round"))
                    continue
                batch.add(pid)
                attrs = {"rationale": prop.rationale, "heuristics": list(prop.heuristics), "round": round_no, **prop.attrs}
                self.study.enqueue_trial(self.problem.to_params(prop.point), user_attrs=attrs)
            self._led = _LedRound(ctx, rejected)
            self.study.set_user_attr(ATTR_ROUND, round_no + 1)
            self.result.rounds_led += 1
            return True
        finally:
            self._leases.discard("round")
            self.coord.release("round", self.name)

    def _observe_led(self, evaluations: list[Evaluation]) -> None:
        """Tell the proposer how the round this worker led last went (every worker's evaluations of it)."""
        if self._led is None:
            return
        led, self._led = self._led, None
        results = [e for e in evaluations if e.attrs.get("round") == led.ctx.round]
        self.proposer.observe(led.ctx, results, led.rejected)

    def _refresh_found(self, evaluations: list[Evaluation]) -> None:
        if self._reference is None:
            return
        first, second = self.problem.front_objectives
        paid = [e for e in evaluations if e.query]
        self._found = ([e.values[first] for e in paid], [e.values[second] for e in paid])

    def _report(self, values: dict[str, float] | None) -> None:
        """Tell ``on_progress`` about this worker's paid evaluation (``values`` None: it failed, the HV is unchanged)."""
        if self.on_progress is None:
            return
        hv = None
        if self._reference is not None:
            if values is not None:
                first, second = self.problem.front_objectives
                self._found[0].append(values[first])
                self._found[1].append(values[second])
            hv = self._reference.hv_ratio(*self._found) if self._found[0] else None
        # the count read at the start of this step, plus this evaluation (others' show at the next step)
        self.on_progress(Progress(self._done + 1, self.budget, self._trials_at_start + self._asked, hv))

    def _report_final(self) -> None:
        """Tell ``on_progress`` the study's count and HV as this worker ends: every worker's evaluations, not only those
        this worker counted at its last step (others finish their last ones after it), so the end line is the final count."""
        assert self.on_progress is not None
        done = self.coord.counts()[1]
        evaluations = evaluations_from_study(self.problem, self.study)
        self._refresh_found(evaluations)
        hv = self._reference.hv_ratio(*self._found) if self._reference is not None and self._found[0] else None
        self.on_progress(Progress(done, self.budget, int(self.heart.get_n_trials(self.study_id)), hv))

    def _trial(self, number: int) -> optuna.trial.FrozenTrial | None:
        """The study's trial ``number`` (None when there is none)."""
        try:
            return self.heart.get_trial(self.heart.get_trial_id_from_study_id_trial_number(self.study_id, number))
        except KeyError:
            return None

    def _holder_state(self, number: int) -> TrialState | None:
        """The state of claim holder ``number`` as :meth:`Coordination.claim` reads it.

        A trial whose evaluation failed reads COMPLETE: it is settled and paid like a told one
        (the claim is marked evaluated and its point answered, not taken over and re-evaluated).
        """
        trial = self._trial(number)
        if trial is None:
            return None
        return TrialState.COMPLETE if failed_evaluation(trial) else trial.state

    def _evaluate_one(self) -> None:
        """Ask a trial, claim its point, then skip it, answer it from the study, or pay for its evaluation."""
        trial = self.study.ask()
        self._asked += 1
        # the id the asked Trial holds (Optuna's own tell reads it there): looking it up by number was one query a trial
        self._current = trial._trial_id
        self.heart.record_heartbeat(self._current)  # a trial without one is never detected as stale
        try:
            trial.set_user_attr("worker", self.name)  # first: a rerun after a kill can tell whose trial this was
            point = self.problem.suggest(trial)
            pid = self.problem.point_id(point)
            verdict, other = self._retry("claiming", lambda: self.coord.claim(pid, trial.number, self.budget, self._holder_state))
            trial.set_user_attr("point_id", pid)
            trial.set_user_attr("design", self.problem.describe(point))
            if verdict in ("busy", "full"):
                self._skip(trial, f"{verdict}: point claimed by trial {other}" if other is not None else "budget claimed")
            elif verdict == "done":
                assert other is not None
                self._answer(trial, other)
            else:
                if verdict == "takeover":
                    trial.set_user_attr("retry_of", other)
                    self.result.requeued_seen += 1
                self._pay(trial, point, pid)
        except optuna.exceptions.UpdateFinishedTrialError:
            stored = self._trial(trial.number)
            if stored is None or stored.state == TrialState.RUNNING:
                raise  # not finished elsewhere: a real error
            # another worker failed this trial as stale (this worker looked dead: too slow to beat on a loaded machine)
            # and re-queued a copy, which takes its point and claim over; so this worker drops it, as _tell does
            log.warning(
                "trial %d is %s: another worker failed it as stale and re-queued a copy, which takes its place; dropped here",
                trial.number,
                stored.state.name,
            )
        finally:
            self._current = None

    def _skip(self, trial: optuna.Trial, why: str) -> None:
        """End ``trial`` PRUNED: it costs nothing (its point is another trial's, or the budget is claimed)."""
        trial.set_user_attr("skipped", why)
        self._retry("telling", lambda: self._tell(trial, None, TrialState.PRUNED))
        self.result.pruned += 1

    def _answer(self, trial: optuna.Trial, other: int) -> None:
        """Answer ``trial`` from trial ``other``, which evaluated its point; a point that failed is skipped, not retried."""
        holder = self._trial(other)
        if holder is None or holder.state != TrialState.COMPLETE:
            reason = holder.user_attrs.get(FAILURE, "its trial ended without a result") if holder is not None else "its trial is gone"
            self._skip(trial, f"failed: the point's evaluation in trial {other} failed ({reason})")
            return
        values = self._values_of(other)
        trial.set_user_attr("query", False)
        self._retry("telling", lambda: self._tell(trial, values, TrialState.COMPLETE))
        self.result.answered += 1

    def _pay(self, trial: optuna.Trial, point: Any, pid: str) -> None:
        """Evaluate ``point`` (claimed for ``trial``) and record the result or the failure; both are paid for.

        An evaluation interrupted by a stop is neither: its trial is failed and re-queued (see :meth:`_abandon`).
        """
        outcome = self._run_evaluation(point)
        trial.set_user_attr("query", True)
        if outcome.interrupted is not None:
            self._abandon(trial, outcome.interrupted)
            return
        if outcome.failure is not None:
            trial.set_user_attr(FAILURE, outcome.failure)
            if outcome.traceback:
                trial.set_user_attr("traceback", outcome.traceback)
            log.warning("trial %d failed: %s (paid: it counts against the budget; the search goes on)", trial.number, outcome.failure)
        state = TrialState.FAIL if outcome.failure is not None else TrialState.COMPLETE
        if self._retry("telling", lambda: self._tell(trial, outcome.values, state)):
            # a failed evaluation's claim is done too: no other worker re-evaluates the point, and the budget stays exact
            self._counts = self._retry("recording", lambda: self.coord.finish_and_count(pid, trial.number, self.study_id))
            if outcome.failure is None:
                self.result.evaluated += 1
            else:
                self.result.failed += 1
            self._report(outcome.values)
            if outcome.failure is not None:
                self._stop_if_broken(outcome.failure)

    def _stop_if_broken(self, failure: str) -> None:
        """Stop when this worker's first :attr:`WorkerSettings.broken_after` paid evaluations all failed (see there)."""
        if self.result.evaluated or self.result.failed < self.settings.broken_after:
            return
        raise EvaluationsFailingError(
            f"the first {self.result.failed} evaluations of this worker all failed (the last: {failure}), so it stopped before "
            "spending more of the budget: the problem's evaluate looks broken. They stay paid in the study; fix the problem, "
            "then start over with another --study (or `coevo runs delete STUDY`); rerunning the same command tries "
            f"{self.settings.broken_after} more"
        )

    def _run_evaluation(self, point: Any) -> _Outcome:
        """``problem.evaluate(point)`` in a thread of its own, waited for until it returns, its deadline or a stop.

        Heartbeats of the trial stop at the deadline (:meth:`_heartbeat`), so a worker stuck past
        it never holds its trial. An evaluation abandoned at the deadline or a stop runs on in its
        daemon thread (Python cannot stop a thread), its result dropped; it ends with the process.
        """
        self._abandoned = [e for e in self._abandoned if not e.done.is_set()]
        if self._abandoned:
            log.warning("%d abandoned evaluation(s) are still running in this process", len(self._abandoned))
        started = time.monotonic()
        limit = self.eval_timeout_s
        self._deadline = started + limit
        call = _Evaluation(self.problem, point)
        try:
            while not call.done.wait(max(0.0, min(self.settings.poll_s, self._deadline - time.monotonic()))):
                if self.stop.is_set():
                    self._abandoned.append(call)
                    return _Outcome(interrupted=f"interrupted by a signal after {time.monotonic() - started:.1f} s of evaluation")
                if time.monotonic() >= self._deadline:
                    self._abandoned.append(call)
                    return _Outcome(failure=f"timed out after {limit:g} s")
        finally:
            self._deadline = math.inf
        return call.outcome(self.problem)

    def _abandon(self, trial: optuna.Trial, reason: str) -> None:
        """End the trial of an evaluation a stop interrupted: failed (the user's stop, not the point's fault), not paid.

        Its copy is re-queued and takes its claim over, so a rerun (or another worker) evaluates
        the point; the budget does not count it.
        """
        trial.set_user_attr(INTERRUPTED, reason)
        log.warning("trial %d: %s; re-queued for a rerun (not counted against the budget)", trial.number, reason)
        self._retry("re-queueing", lambda: self._fail_and_requeue(trial.number))
        self._interrupted = reason

    def _tell(self, trial: optuna.Trial, values: dict[str, float] | None, state: TrialState) -> bool:
        try:
            _tell_no_readback(self.study, trial, None if values is None else [values[o.name] for o in self.problem.objectives], state)
        except (RuntimeError, ValueError, optuna.exceptions.UpdateFinishedTrialError) as exc:
            stored = self._trial(trial.number)
            if stored is not None and stored.state == TrialState.RUNNING:
                raise  # not finished elsewhere: a real error
            if stored is not None and stored.state == state and stored.state != TrialState.FAIL:
                # a retried tell: the first one was recorded, then the connection dropped before its reply came
                log.info("trial %d: its result reached the database before the connection dropped; counted once", trial.number)
                return True
            # failed as stale by another worker while the database was away: its re-queued
            # copy takes over the claim, so this result is dropped rather than counted twice
            now = stored.state.name if stored is not None else "gone"
            log.warning(
                "trial %d is %s: another worker failed it as stale while this one could not reach the database (%s); "
                "its re-queued copy takes its place, so this result is dropped",
                trial.number,
                now,
                exc,
            )
            return False
        return True

    def _values_of(self, number: int) -> dict[str, float]:
        t = self._trial(number)
        assert t is not None and t.values is not None
        return {o.name: v for o, v in zip(self.problem.objectives, t.values, strict=True)}


def _tell_no_readback(study: optuna.Study, trial: optuna.Trial, values: list[float] | None, state: TrialState) -> None:
    """``study.tell(trial, values, state=state)`` without reading the told trial back (see the import of
    ``_tell_with_warning``): the same errors (``ValueError``, ``UpdateFinishedTrialError``), 6-7 statements fewer a trial."""
    if _tell_with_warning is None:  # pragma: no cover
        study.tell(trial, values, state=state)
    else:
        _tell_with_warning(study=study, trial=trial, value_or_values=values, state=state)


def worker_alive(row: dict[str, Any], grace_s: float) -> bool:
    """Whether a worker row belongs to a live worker: it says running, was seen within ``grace_s``, and, on this host, its
    process exists and is not a zombie (:func:`why_gone`)."""
    return row["state"] == "running" and why_gone(row, grace_s) is None


def why_gone(row: dict[str, Any], grace_s: float) -> str | None:
    """Why the worker of a row that says ``running`` is gone (for the row's note), or None while it looks alive.

    Gone: no heartbeat for more than ``grace_s``, or, on this host, its pid names no process or a zombie (a worker killed
    while its parent, a ``coevo search --workers N``, has not reaped it yet: the process is dead all the same).
    """
    silent = time.time() - float(row["last_seen"])
    if silent > grace_s:
        return f"no heartbeat for {silent:.0f} s"
    if row["host"] == socket.gethostname():
        return process_gone(int(row["pid"]))
    return None


def process_gone(pid: int) -> str | None:
    """Why process ``pid`` of this host is certainly gone (it does not exist, or it is a zombie), None when it may run."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"its process {pid} has ended"
    except PermissionError:
        return None  # a process of another user has that pid
    if _zombie(pid):
        return f"its process {pid} has ended (a zombie its parent has not reaped yet)"
    return None


def _zombie(pid: int) -> bool:
    """Whether ``pid`` is a zombie: state ``Z`` in ``/proc/PID/stat`` (False where there is no /proc to read)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return False
    # "pid (comm) state ...": comm may hold spaces and parentheses, so the state follows the last ")"
    fields = stat[stat.rfind(")") + 1 :].split()
    return bool(fields) and fields[0] in ("Z", "X")


def lost_note(reason: str) -> str:
    """The note of a worker row found gone (``lost``), as the worker that marks it and a reader that only shows it write it."""
    return f"found gone at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime())}: {reason}"


@dataclass(frozen=True)
class Settled:
    """What :func:`settle_dead_worker` handed over of a dead worker."""

    leases: int
    """Leases it held (the round's), released."""
    trials: int
    """Its RUNNING trials, failed and re-queued."""


def settle_dead_worker(storage: str | None, study: str, name: str, reason: str, settings: WorkerSettings) -> Settled | None:
    """Hand over at once what worker ``name`` held, when the search that started it saw its process end (``reason``).

    Only for a process that is certainly gone (its parent reaped it), which is what the lease's expiry and the
    heartbeats' grace otherwise wait to be sure of. ``name`` is the one the parent gave it (:data:`ENV_WORKER_TAG`),
    so no other worker is touched. Its row is marked ``lost`` with ``reason``, the leases it held (the round's) are
    released, so the next worker leads the round now rather than after three grace periods, and its RUNNING trials
    are failed and re-queued, as a worker starting after it would do. Returns what was handed over; None when it
    had registered no row (it died starting).

    Runs in the search's watcher thread: nothing here touches the process-wide warnings state.
    """
    coord = Coordination(storage, study, settings.timeouts, create=False)
    try:
        if not any(w["worker"] == name for w in coord.workers()):
            return None
        coord.mark_lost(name, math.inf, reason)
        leases_held = coord.release_all(name)
    finally:
        coord.engine.dispose()
    rdb = open_storage(storage, timeouts=settings.timeouts, create=False)
    try:
        trials = _fail_running(rdb, study, name)
    finally:
        rdb.engine.dispose()  # a search's own process calls this: its connections must not pile up
    return Settled(leases_held, trials)


def _fail_running(rdb: optuna.storages.RDBStorage, study_name: str, worker: str) -> int:
    """Fail and re-queue the RUNNING trials of dead ``worker`` (each copy takes its trial's claim over); how many."""
    study = optuna.load_study(study_name=study_name, storage=rdb, sampler=optuna.samplers.RandomSampler())
    study_id = rdb.get_study_id_from_name(study_name)
    running = rdb.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,))
    return sum(fail_and_requeue(rdb, study, study_id, t.number) for t in running if t.user_attrs.get("worker") == worker)


STOPPING_NOTE = "\nstopping: the evaluation running is abandoned and the step under way finishes first; Ctrl-C again to stop at once\n"
"""Said on a terminal at the first Ctrl-C of a search or worker."""


def _say_stopping() -> None:
    """:data:`STOPPING_NOTE` on a terminal, once per Ctrl-C: the proposer's current step (a round's proposals, a model's
    fit) finishes before the stop is seen, which can take a while, and the person should know Ctrl-C was heard.

    Not from a worker a search started (:data:`ENV_WORKER_TAG` set): a terminal's Ctrl-C reaches the whole process
    group, and the search that started it speaks for it. ``os.write``: a signal handler may run while the main thread
    is inside a write to ``sys.stderr``; a terminal gone (EIO) or busy (EAGAIN) must not raise into that thread.
    """
    if os.environ.get(ENV_WORKER_TAG):
        return
    try:
        if os.isatty(2):
            os.write(2, STOPPING_NOTE.encode())
    except OSError:
        pass


def _stop_on_signals(stop: threading.Event) -> Callable[[], None]:
    """SIGINT/SIGTERM set ``stop`` (a running evaluation is abandoned, see :meth:`Worker._run_evaluation`); a
    second SIGINT raises ``KeyboardInterrupt`` at once. Returns a restore function."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()
        if signum == signal.SIGINT:
            _say_stopping()

    for s in previous:
        signal.signal(s, handler)

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore
