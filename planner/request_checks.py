"""Checks of a plan request against the catalog that :func:`planner.request.resolve_request`
runs: FP4 on offer, and a class's speculative decoding (kept apart from the request's
schema; they take the request's values, not its types); and a request shape against the
model's context window (:func:`check_context_window`, the capacity analyses')."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from catalog.schema import Catalog, Dtype, Model
from planner.errors import PlanningError
from planner.roofline.replica import fp4_format_error
from planner.roofline.speculative import check_speculation

S = TypeVar("S")


def check_fp4_offer(
    dtypes: Sequence[Dtype], model: Model, catalog: Catalog, gpus: list[str]
) -> None:
    """Refuse ``fp4`` in ``candidates.dtypes`` (error on ``candidates.dtypes[i]``) when
    the model has no published FP4 checkpoint, or when none of the offered GPUs has an
    FP4 peak for one of its checkpoints' formats (:func:`planner.roofline.fp4_format_error`).
    When some offered GPUs can and others cannot, fp4 is screened out on the others
    (reason ``dtype_unsupported``)."""
    if Dtype.FP4 not in dtypes:
        return
    i = list(dtypes).index(Dtype.FP4)
    errors = [fp4_format_error(model, catalog.gpus[g]) for g in gpus]
    if all(errors):
        reason = errors[0] if len(set(errors)) == 1 or not model.fp4_checkpoints else None
        raise PlanningError.for_field(
            f"candidates.dtypes[{i}]",
            reason
            or "fp4 needs an FP4 peak for a checkpoint's format on an offered GPU: "
            + "; ".join(sorted(set(e for e in errors if e))),
        )


def checked_speculative(catalog: Catalog, model: Model, sp: S, field: str) -> S:
    """A class's ``speculative`` settings (``traffic.classes[i].speculative``) once checked
    against the model and catalog (:func:`planner.roofline.check_speculation`; errors name
    ``<field>.<setting>``); None stays None."""
    if sp is None:
        return sp
    spec: Any = sp
    check_speculation(
        catalog,
        model,
        spec.method,
        spec.draft_tokens,
        spec.acceptance_length,
        spec.draft_model,
        spec.draft_repo,
        field,
    )
    return sp


def check_context_window(model: Model, prompt_tokens: int, output_tokens: int) -> None:
    """Refuse ``prompt_tokens + output_tokens`` longer than ``model``'s context window
    (``max_context_tokens``), naming ``prompt_tokens``."""
    if prompt_tokens + output_tokens > model.max_context_tokens:
        raise PlanningError.for_field(
            "prompt_tokens",
            f"{prompt_tokens:,} + {output_tokens:,} tokens exceed {model.id}'s context window "
            f"({model.max_context_tokens:,})",
        )
