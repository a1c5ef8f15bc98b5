"""Sessions for the command line: a migrated database, or an error saying what to do.

(The service builds its engine once, in ``api.main``; the CLI opens one per command.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from api.db import migrate
from api.db.session import make_engine, make_sessionmaker
from api.services.errors import DatabaseNotReady


@contextmanager
def open_session(database_url: str) -> Iterator[Session]:
    """A session on the database at ``database_url``, which must exist and be at the
    newest revision (:class:`DatabaseNotReady` otherwise)."""
    url = make_url(database_url)
    is_file = url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")
    if is_file and not Path(str(url.database)).exists():
        raise DatabaseNotReady(
            "database", f"{url.database} does not exist; run 'fleetplan db upgrade' first"
        )
    current, head = migrate.current_revision(database_url), migrate.head_revision()
    if current != head:
        raise DatabaseNotReady(
            "database",
            f"at revision {current or '(empty)'}, not {head}; run 'fleetplan db upgrade'",
        )
    engine = make_engine(database_url)
    try:
        with make_sessionmaker(engine)() as session:
            yield session
    finally:
        engine.dispose()


def sessions_like(session: Session) -> sessionmaker[Session]:
    """A session factory on ``session``'s connection (for work on another thread)."""
    return sessionmaker(bind=session.get_bind(), expire_on_commit=False)


def upgrade(database_url: str, revision: str = "head") -> None:
    migrate.upgrade(database_url, revision)


def downgrade(database_url: str, revision: str = "-1") -> None:
    migrate.downgrade(database_url, revision)


def revisions(database_url: str) -> tuple[str | None, str | None]:
    """(the database's revision, the newest one)."""
    return migrate.current_revision(database_url), migrate.head_revision()
