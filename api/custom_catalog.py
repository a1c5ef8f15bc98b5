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
from sqlalchemy.orm import Session

from api.db import repository as repo
from catalog.loader import KIND_SCHEMAS, parse_entry, with_entries
from catalog.schema import Catalog

Entries = dict[str, dict[str, BaseModel]]


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
