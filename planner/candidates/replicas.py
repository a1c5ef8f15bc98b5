"""The replicas screening prices: a request's replica of one shape, with the class's
speculative decoding, and whether a model fits one node (planner.candidates)."""

from __future__ import annotations

from catalog.schema import Catalog, Dtype
from planner import roofline as rl
from planner.candidates.model import kv_dtype_for
from planner.errors import PlanningError
from planner.request import ResolvedClass, ResolvedRequest


def request_replica(
    catalog: Catalog,
    req: ResolvedRequest,
    gpu_id: str,
    dtype: Dtype,
    kv_dtype: Dtype,
    tp: int,
    *,
    pp: int = 1,
    dp: int = 1,
    ep: int = 1,
) -> rl.Replica:
    """The replica a request's pool of this shape runs: :func:`planner.roofline.build_replica`
    with the request's efficiency overrides (``efficiency.prefill_mfu``, ``decode_mbu``,
    ``overlap_factor``), as screening prices it and the simulation replays it."""
    eff = req.request.efficiency
    return rl.build_replica(
        catalog,
        req.model_id,
        gpu_id,
        tp=tp,
        dtype=dtype,
        kv_dtype=kv_dtype,
        mfu=eff.prefill_mfu,
        mbu=eff.decode_mbu,
        overlap_factor=eff.overlap_factor,
        pp=pp,
        dp=dp,
        ep=ep,
    )


def fits_one_node(catalog: Catalog, model_id: str, gpu_id: str, dtype) -> bool:
    """Whether ``model_id`` in ``dtype`` fits one node of ``gpu_id`` without pipeline
    stages (at the largest TP within a node: :func:`planner.roofline.memory_needed_gb`
    against :func:`planner.roofline.usable_memory_gb`)."""
    gpu = catalog.gpus[gpu_id]
    node = min(rl.max_tp(gpu), gpu.server.gpus_per_node or gpu.server.gpus_per_server)
    tp = 1 << (node.bit_length() - 1)  # largest power of two within the node
    try:
        replica = rl.build_replica(
            catalog,
            model_id,
            gpu_id,
            tp=tp,
            dtype=dtype,
            kv_dtype=kv_dtype_for(dtype),
            check_fit=False,
        )
    except PlanningError:
        return True  # not a memory question: the screening reports it
    return rl.memory_needed_gb(replica) <= rl.usable_memory_gb(replica)


def speculative_replica(catalog: Catalog, cls: ResolvedClass, replica: rl.Replica) -> rl.Replica:
    """The replica a class's decode and aggregated pools run: ``replica`` with the class's
    speculative decoding (:func:`planner.roofline.with_speculation`), or ``replica``
    itself when the class has none. Prefill pools never speculate."""
    sp = cls.speculative
    if sp is None:
        return replica
    return rl.with_speculation(
        catalog,
        replica,
        sp.method,
        sp.draft_tokens,
        sp.acceptance_length,
        sp.draft_model,
        sp.draft_repo,
    )
