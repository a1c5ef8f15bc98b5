"""Read-only catalog: ``GET /catalog``, ``/catalog/{kind}``, ``/catalog/{kind}/{id}``.

Each kind gets its own typed routes (so the OpenAPI schema shows a ``Gpu``, a
``Model``...); a catch-all answers unknown kinds with a 404 that lists the known ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from api.deps import CatalogDep
from api.errors import ApiError, not_found
from catalog.loader import KIND_SCHEMAS
from catalog.schema import Catalog

router = APIRouter(prefix="/catalog", tags=["catalog"])

KINDS: tuple[str, ...] = tuple(KIND_SCHEMAS)
SINGULAR = {"gpus": "GPU", "models": "model", "workloads": "workload", "links": "link"}


class CatalogSummary(BaseModel):
    catalog_hash: str
    counts: dict[str, int]


def unknown_kind_error(kind: str) -> ApiError:
    return not_found("kind", f"unknown catalog kind {kind!r}; expected one of {', '.join(KINDS)}")


def entries_of(catalog: Catalog, kind: str) -> dict[str, BaseModel]:
    """The entries of ``kind`` by id (raises a 404 ApiError for an unknown kind)."""
    if kind not in KIND_SCHEMAS:
        raise unknown_kind_error(kind)
    return getattr(catalog, kind)


def get_entry(catalog: Catalog, kind: str, entry_id: str) -> BaseModel:
    entries = entries_of(catalog, kind)
    if entry_id not in entries:
        raise not_found("id", f"unknown {SINGULAR.get(kind, kind)} {entry_id!r}")
    return entries[entry_id]


@router.get("", response_model=CatalogSummary)
def catalog_summary(catalog: CatalogDep) -> CatalogSummary:
    """The catalog's content hash and how many entries of each kind it holds."""
    return CatalogSummary(
        catalog_hash=catalog.content_hash,
        counts={kind: len(entries_of(catalog, kind)) for kind in KINDS},
    )


def _list_endpoint(kind: str) -> Callable[..., Any]:
    def list_entries(catalog: CatalogDep) -> list[BaseModel]:
        return [entry for _, entry in sorted(entries_of(catalog, kind).items())]

    list_entries.__doc__ = f"Every {SINGULAR[kind]} in the catalog, sorted by id."
    return list_entries


def _get_endpoint(kind: str) -> Callable[..., Any]:
    def get_one(entry_id: str, catalog: CatalogDep) -> BaseModel:
        return get_entry(catalog, kind, entry_id)

    get_one.__doc__ = f"One {SINGULAR[kind]} by id (404 when unknown)."
    return get_one


for _kind, _schema in KIND_SCHEMAS.items():
    router.add_api_route(
        f"/{_kind}",
        _list_endpoint(_kind),
        methods=["GET"],
        response_model=list[_schema],  # type: ignore[valid-type]
        name=f"list_{_kind}",
        summary=f"List {_kind}",
    )
    router.add_api_route(
        f"/{_kind}/{{entry_id}}",
        _get_endpoint(_kind),
        methods=["GET"],
        response_model=_schema,
        name=f"get_{_kind}",
        summary=f"Get one of {_kind}",
        responses={404: {"description": "Unknown id"}},
    )


# Known kinds matched the typed routes above; anything else reaching here is unknown.
@router.get("/{kind}", include_in_schema=False)
def unknown_kind(kind: str) -> None:
    raise unknown_kind_error(kind)


@router.get("/{kind}/{entry_id}", include_in_schema=False)
def unknown_kind_entry(kind: str, entry_id: str) -> None:
    raise unknown_kind_error(kind)
