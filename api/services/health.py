"""Is the database answering?"""

from __future__ import annotations

import logging

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from api.db.session import ping

log = logging.getLogger("api")


def database_reachable(engine: Engine) -> bool:
    try:
        ping(engine)
    except SQLAlchemyError as err:
        log.warning("health: database unreachable: %s", str(err).splitlines()[0])
        return False
    return True
