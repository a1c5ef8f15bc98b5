"""The catalog a request sees: the shipped entries plus the custom ones in the database.

Custom entries (a private GPU price, a fine-tuned model, an in-house workload) live
in ``catalog_entries``; they are validated like shipped ones (``parse_entry``, then
the reference checks of ``with_entries``) and may never reuse a shipped id. The
merged catalog has its own content hash, which every plan made with it records.
Merging is cheap (well under a millisecond), so it is done per request.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from api.db import repository as repo
from api.services.errors import Conflict, NotFound
from catalog.loader import KIND_SCHEMAS, CatalogError, load_catalog, parse_entry, with_entries
from catalog.schema import Catalog

__all__ = ["KIND_SCHEMAS", "CatalogError", "merged_catalog", "shipped_catalog"]

Entries = dict[str, dict[str, BaseModel]]


def shipped_catalog() -> Catalog:
    """The catalog shipped with fleetplan (YAML files, validated and hashed)."""
    return load_catalog()


def empty_entries() -> Entries:
    return {kind: {} for kind in KIND_SCHEMAS}


def load_custom_entries(session: Session) -> Entries:
    """Every custom entry in the database, parsed, by kind and id."""
    out = empty_entries()
    for record in repo.list_catalog_entries(session):
        if record.kind not in out:  # a kind this version does not know: ignore it
            continue
        where = f"custom {record.kind} {record.entry_id!r}"
        out[record.kind][record.entry_id] = parse_entry(record.kind, record.body, where)
    return out


def merge(base: Catalog, custom: Mapping[str, Mapping[str, BaseModel]]) -> Catalog:
    """``base`` with ``custom`` added (checked, re-hashed); ``base`` itself when empty."""
    if not any(custom.values()):
        return base
    return with_entries(base, custom)


def merged_catalog(session: Session, base: Catalog) -> Catalog:
    """The shipped catalog plus every custom entry in the database."""
    return merge(base, load_custom_entries(session))


# --------------------------------------------------------------------------- custom entries

SINGULAR = {"gpus": "GPU", "models": "model", "workloads": "workload", "links": "link"}


def _refuse_shipped(shipped: Catalog, kind: str, entry_id: str) -> None:
    if entry_id in getattr(shipped, kind):
        detail = (
            f"{SINGULAR[kind]} {entry_id!r} is a shipped entry; "
            "shipped entries are read-only; post a new id"
        )
        raise Conflict("id", detail, [("id", "shipped entries are read-only")])


def _check_merged(
    session: Session, shipped: Catalog, kind: str, changes: Mapping[str, BaseModel | None]
) -> None:
    """Reference checks of the merged catalog with ``changes`` applied to ``kind``
    (an entry, or None to remove it); raises ``CatalogError``."""
    custom = load_custom_entries(session)
    for entry_id, entry in changes.items():
        if entry is None:
            custom[kind].pop(entry_id, None)
        else:
            custom[kind][entry_id] = entry
    merge(shipped, custom)


def _commit_or_conflict(session: Session, kind: str, entry_id: str) -> None:
    try:
        session.commit()
    except IntegrityError:  # a concurrent write of the same id won
        session.rollback()
        raise Conflict(
            "id",
            f"custom {SINGULAR[kind]} {entry_id!r} was written concurrently; retry",
            [("id", "written concurrently")],
        ) from None


def add_custom_entry(session: Session, shipped: Catalog, kind: str, entry: BaseModel) -> None:
    """Store a new custom entry (checked against the merged catalog) and commit;
    :class:`Conflict` for a shipped or existing id."""
    entry_id: str = entry.id  # type: ignore[attr-defined]
    _refuse_shipped(shipped, kind, entry_id)
    if repo.get_catalog_entry(session, kind, entry_id) is not None:
        raise Conflict(
            "id",
            f"custom {SINGULAR[kind]} {entry_id!r} exists; "
            f"PUT /catalog/{kind}/{entry_id} replaces it",
            [("id", "already exists")],
        )
    _check_merged(session, shipped, kind, {entry_id: entry})
    repo.put_catalog_entry(session, kind, entry_id, entry.model_dump(mode="json"))
    _commit_or_conflict(session, kind, entry_id)


def put_custom_entry(session: Session, shipped: Catalog, kind: str, entry: BaseModel) -> bool:
    """Create or replace a custom entry and commit; True when it replaced one."""
    entry_id: str = entry.id  # type: ignore[attr-defined]
    _refuse_shipped(shipped, kind, entry_id)
    existed = repo.get_catalog_entry(session, kind, entry_id) is not None
    _check_merged(session, shipped, kind, {entry_id: entry})
    repo.put_catalog_entry(session, kind, entry_id, entry.model_dump(mode="json"))
    _commit_or_conflict(session, kind, entry_id)
    return existed


def delete_custom_entry(session: Session, shipped: Catalog, kind: str, entry_id: str) -> None:
    """Delete a custom entry and commit; :class:`Conflict` for a shipped one or one
    another custom entry still references, :class:`NotFound` for an unknown one."""
    _refuse_shipped(shipped, kind, entry_id)
    if repo.get_catalog_entry(session, kind, entry_id) is None:
        raise NotFound("id", f"no custom {SINGULAR[kind]} {entry_id!r}")
    try:
        _check_merged(session, shipped, kind, {entry_id: None})
    except CatalogError as err:
        raise Conflict(
            "id",
            f"custom {SINGULAR[kind]} {entry_id!r} is still referenced: {err}",
            err.issues,
        ) from None
    repo.delete_catalog_entry(session, kind, entry_id)
    session.commit()
