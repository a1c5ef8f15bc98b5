"""The catalog: shipped entries (read-only) plus custom ones kept in the database.

``GET /catalog``, ``/catalog/{kind}``, ``/catalog/{kind}/{id}`` read the merged
catalog; every entry carries ``"source": "shipped" | "custom"``. Custom entries (a
private GPU price, a fine-tuned model, an in-house workload) are written with
``POST /catalog/{kind}`` (a new id), ``PUT /catalog/{kind}/{id}`` (create or
replace) and ``DELETE /catalog/{kind}/{id}``. They are validated like shipped
entries (the same schema, then the reference checks of the merged catalog) and
never shadow a shipped entry: writing a shipped id is a 409.

Each kind gets its own typed routes (so the OpenAPI schema shows a ``Gpu``, a
``Model``...); catch-alls answer unknown kinds with a 404 that lists the known ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, Field, create_model
from sqlalchemy.orm import Session

from api.deps import SessionDep, WriteAccess
from api.errors import ApiError, not_found
from api.jsonbody import JsonBodyRoute
from api.schemas import error_responses
from api.services import catalog as custom_catalog
from api.services.catalog import KIND_SCHEMAS, SINGULAR, load_custom_entries, merge
from catalog.schema import Catalog

router = APIRouter(prefix="/catalog", tags=["catalog"], route_class=JsonBodyRoute)

KINDS: tuple[str, ...] = tuple(KIND_SCHEMAS)
ID_PATTERN = r"^[a-z0-9][a-z0-9.\-]*$"  # catalog.schema.Id

Source = Literal["shipped", "custom"]

# Response models: each kind's schema plus where the entry comes from.
ENTRY_MODELS: dict[str, type[BaseModel]] = {
    kind: create_model(
        f"{schema.__name__}Entry",
        __base__=schema,
        source=(Source, Field(description="`shipped` with fleetplan, or `custom` (database).")),
    )
    for kind, schema in KIND_SCHEMAS.items()
}


class CatalogSummary(BaseModel):
    catalog_hash: str = Field(description="Content hash of the merged catalog plans use.")
    shipped_catalog_hash: str = Field(description="Content hash of the shipped entries alone.")
    counts: dict[str, int] = Field(description="Entries of each kind, shipped + custom.")
    custom_counts: dict[str, int] = Field(description="Custom entries of each kind.")


def unknown_kind_error(kind: str) -> ApiError:
    return not_found("kind", f"unknown catalog kind {kind!r}; expected one of {', '.join(KINDS)}")


def entries_of(catalog: Catalog, kind: str) -> dict[str, BaseModel]:
    """The entries of ``kind`` by id (raises a 404 ApiError for an unknown kind)."""
    if kind not in KIND_SCHEMAS:
        raise unknown_kind_error(kind)
    return getattr(catalog, kind)


def _shipped(request: Request) -> Catalog:
    return request.app.state.catalog


def _with_source(entry: BaseModel, source: Source) -> dict[str, Any]:
    return {**entry.model_dump(mode="json"), "source": source}


def _merged_entries(
    request: Request, session: Session, kind: str
) -> dict[str, tuple[BaseModel, Source]]:
    shipped = entries_of(_shipped(request), kind)
    out: dict[str, tuple[BaseModel, Source]] = {i: (e, "shipped") for i, e in shipped.items()}
    custom = load_custom_entries(session)[kind]
    out.update({i: (e, "custom") for i, e in custom.items() if i not in shipped})
    return out


@router.get("", response_model=CatalogSummary)
def catalog_summary(request: Request, session: SessionDep) -> CatalogSummary:
    """The merged catalog's content hash (what a plan made now records) and how many
    entries of each kind it holds."""
    shipped = _shipped(request)
    custom = load_custom_entries(session)
    merged = merge(shipped, custom)
    return CatalogSummary(
        catalog_hash=merged.content_hash,
        shipped_catalog_hash=shipped.content_hash,
        counts={kind: len(entries_of(merged, kind)) for kind in KINDS},
        custom_counts={kind: len(custom[kind]) for kind in KINDS},
    )


# --------------------------------------------------------------------------- reads


def _list_endpoint(kind: str) -> Callable[..., Any]:
    def list_entries(
        request: Request,
        session: SessionDep,
        source: Annotated[Source | None, Query(description="Only entries of this source.")] = None,
    ) -> list[dict[str, Any]]:
        merged = _merged_entries(request, session, kind)
        return [
            _with_source(entry, src)
            for _, (entry, src) in sorted(merged.items())
            if source is None or src == source
        ]

    list_entries.__doc__ = f"Every {SINGULAR[kind]} in the catalog (shipped + custom), by id."
    return list_entries


def _get_endpoint(kind: str) -> Callable[..., Any]:
    def get_one(entry_id: str, request: Request, session: SessionDep) -> dict[str, Any]:
        merged = _merged_entries(request, session, kind)
        if entry_id not in merged:
            raise not_found("id", f"unknown {SINGULAR[kind]} {entry_id[:80]!r}")
        entry, src = merged[entry_id]
        return _with_source(entry, src)

    get_one.__doc__ = f"One {SINGULAR[kind]} by id (404 when unknown)."
    return get_one


# --------------------------------------------------------------------------- writes


def _post_endpoint(kind: str) -> Callable[..., Any]:
    schema = KIND_SCHEMAS[kind]

    def post_entry(
        entry: BaseModel,  # the kind's schema, set below
        request: Request,
        response: Response,
        session: SessionDep,
    ) -> dict[str, Any]:
        entry_id: str = entry.id  # type: ignore[attr-defined]
        custom_catalog.add_custom_entry(session, _shipped(request), kind, entry)
        response.headers["Location"] = f"/catalog/{kind}/{entry_id}"
        return _with_source(entry, "custom")

    post_entry.__annotations__["entry"] = schema  # a real class: FastAPI reads it as the body
    post_entry.__doc__ = (
        f"Add a custom {SINGULAR[kind]} (201). Its id must be new: a shipped or custom "
        f"id is a 409 (PUT replaces a custom entry)."
    )
    return post_entry


def _put_endpoint(kind: str) -> Callable[..., Any]:
    schema = KIND_SCHEMAS[kind]

    def put_entry(
        entry_id: Annotated[str, Path(max_length=64, pattern=ID_PATTERN)],
        entry: BaseModel,  # the kind's schema, set below
        request: Request,
        response: Response,
        session: SessionDep,
    ) -> dict[str, Any]:
        if entry.id != entry_id:  # type: ignore[attr-defined]
            message = f"must equal the id in the path ({entry_id!r})"
            raise ApiError(422, "invalid_input", f"id: {message}", [("id", message)])
        existed = custom_catalog.put_custom_entry(session, _shipped(request), kind, entry)
        response.status_code = 200 if existed else 201
        if not existed:
            response.headers["Location"] = f"/catalog/{kind}/{entry_id}"
        return _with_source(entry, "custom")

    put_entry.__annotations__["entry"] = schema
    put_entry.__doc__ = (
        f"Create (201) or replace (200) the custom {SINGULAR[kind]} with this id. "
        "A shipped id is a 409: shipped entries are read-only."
    )
    return put_entry


def _delete_endpoint(kind: str) -> Callable[..., Any]:
    def delete_entry(
        entry_id: Annotated[str, Path(max_length=64, pattern=ID_PATTERN)],
        request: Request,
        session: SessionDep,
    ) -> Response:
        custom_catalog.delete_custom_entry(session, _shipped(request), kind, entry_id)
        return Response(status_code=204)

    delete_entry.__doc__ = (
        f"Delete a custom {SINGULAR[kind]} (204). Shipped entries are read-only (409); "
        "so is an entry other custom entries still reference. Stored plans keep their "
        "requests and catalog hash."
    )
    return delete_entry


for _kind, _schema in KIND_SCHEMAS.items():
    _entry_model = ENTRY_MODELS[_kind]
    router.add_api_route(
        f"/{_kind}",
        _list_endpoint(_kind),
        methods=["GET"],
        response_model=list[_entry_model],  # type: ignore[valid-type]
        name=f"list_{_kind}",
        summary=f"List {_kind}",
        responses=error_responses(422),
    )
    router.add_api_route(
        f"/{_kind}/{{entry_id}}",
        _get_endpoint(_kind),
        methods=["GET"],
        response_model=_entry_model,
        name=f"get_{_kind}",
        summary=f"Get one of {_kind}",
        responses=error_responses(404),
    )
    router.add_api_route(
        f"/{_kind}",
        _post_endpoint(_kind),
        methods=["POST"],
        status_code=201,
        response_model=_entry_model,
        dependencies=[WriteAccess],
        name=f"create_{_kind}",
        summary=f"Add a custom entry to {_kind}",
        responses=error_responses(401, 409, 413, 415, 422),
    )
    router.add_api_route(
        f"/{_kind}/{{entry_id}}",
        _put_endpoint(_kind),
        methods=["PUT"],
        status_code=200,
        response_model=_entry_model,
        dependencies=[WriteAccess],
        name=f"put_{_kind}",
        summary=f"Create or replace a custom entry of {_kind}",
        responses={
            201: {"model": _entry_model, "description": "Created"},
            **error_responses(401, 409, 413, 415, 422),
        },
    )
    router.add_api_route(
        f"/{_kind}/{{entry_id}}",
        _delete_endpoint(_kind),
        methods=["DELETE"],
        status_code=204,
        dependencies=[WriteAccess],
        name=f"delete_{_kind}",
        summary=f"Delete a custom entry of {_kind}",
        responses=error_responses(401, 404, 409, 422),
    )


# Known kinds matched the typed routes above; anything else reaching here is unknown.
@router.api_route("/{kind}", methods=["GET", "POST"], include_in_schema=False)
def unknown_kind(kind: str) -> None:
    raise unknown_kind_error(kind)


@router.api_route("/{kind}/{entry_id}", methods=["GET", "PUT", "DELETE"], include_in_schema=False)
def unknown_kind_entry(kind: str, entry_id: str) -> None:
    raise unknown_kind_error(kind)
