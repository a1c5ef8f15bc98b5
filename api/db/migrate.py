"""Run the Alembic migrations programmatically (used by ``fleetplan db`` and tests).

The Alembic files live in the ``migrations`` package (``alembic.ini`` included),
so this works from any working directory and from an installed wheel.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

import migrations
from api.db.session import make_engine, normalize_url

if TYPE_CHECKING:
    from alembic.config import Config

# alembic is imported where it is used: most CLI commands never migrate.

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent
ALEMBIC_INI = MIGRATIONS_DIR / "alembic.ini"


def alembic_config(url: str | URL | None = None, *, configure_logging: bool = False) -> Config:
    """The packaged Alembic config, pointed at ``url`` (default: FLEETPLAN_DATABASE_URL).

    The URL is passed as an attribute, not an ini option, so passwords with ``%`` need
    no escaping and are never written anywhere.
    """
    from alembic.config import Config

    cfg = Config(str(ALEMBIC_INI))
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if url is not None:
        cfg.attributes["database_url"] = normalize_url(url).render_as_string(hide_password=False)
    cfg.attributes["configure_logging"] = configure_logging
    return cfg


def upgrade(url: str | URL | None = None, revision: str = "head") -> None:
    """Apply migrations up to ``revision`` (default: the newest)."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str | URL | None = None, revision: str = "base") -> None:
    """Revert migrations down to ``revision`` (default: an empty database)."""
    from alembic import command

    command.downgrade(alembic_config(url), revision)


def head_revision() -> str | None:
    """The newest revision in the migrations directory."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(url: str | URL) -> str | None:
    """The revision the database at ``url`` is at (None when never migrated)."""
    from alembic.runtime.migration import MigrationContext

    engine = make_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
