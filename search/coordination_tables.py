"""coevo's coordination tables beside an Optuna study (claims, leases, worker rows), and taking a lease.

They are declared here, apart from :mod:`search.workers` which uses them most, so that
:mod:`search.study` can take a lease (who tags a new study) without importing the workers.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
import sqlalchemy.exc

metadata = sa.MetaData()
leases = sa.Table(
    "coevo_leases",
    metadata,
    sa.Column("study", sa.String(512), primary_key=True),
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("owner", sa.String(128), nullable=True),
    sa.Column("expires_at", sa.Float, nullable=False, default=0.0),
)
claims = sa.Table(
    "coevo_claims",
    metadata,
    sa.Column("study", sa.String(512), primary_key=True),
    sa.Column("point_id", sa.String(256), primary_key=True),
    sa.Column("trial", sa.Integer, nullable=False),
    sa.Column("done", sa.Boolean, nullable=False, default=False),
)
workers = sa.Table(
    "coevo_workers",
    metadata,
    sa.Column("study", sa.String(512), primary_key=True),
    sa.Column("worker", sa.String(128), primary_key=True),
    sa.Column("host", sa.String(256), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("evaluations", sa.Integer, nullable=False, default=0),
    sa.Column("note", sa.Text, nullable=True),
)


TAG_LEASE = "tag"
"""The lease whose holder tags a new study (:func:`search.study._tag_once`); a new study's purge leaves it."""


def take_lease(engine: sa.engine.Engine, study: str, name: str, owner: str, ttl_s: float) -> bool:
    """Take (or renew) lease ``name`` of ``study`` for ``ttl_s`` seconds unless another owner holds an unexpired one."""
    now = time.time()
    with engine.begin() as conn:
        taken = conn.execute(
            leases.update()
            .where(leases.c.study == study, leases.c.name == name)
            .where(sa.or_(leases.c.owner.is_(None), leases.c.owner == owner, leases.c.expires_at < now))
            .values(owner=owner, expires_at=now + ttl_s)
        ).rowcount
        if taken:
            return True
        exists = conn.execute(sa.select(leases.c.name).where(leases.c.study == study, leases.c.name == name)).first()
        if exists:
            return False
        try:
            with conn.begin_nested():
                conn.execute(leases.insert().values(study=study, name=name, owner=owner, expires_at=now + ttl_s))
        except sqlalchemy.exc.IntegrityError:
            return False
        return True


def release_lease(engine: sa.engine.Engine, study: str, name: str, owner: str) -> None:
    """Give lease ``name`` of ``study`` back (only its owner can), so the next taker need not wait for it to expire."""
    with engine.begin() as conn:
        conn.execute(leases.update().where(leases.c.study == study, leases.c.name == name, leases.c.owner == owner).values(owner=None))
