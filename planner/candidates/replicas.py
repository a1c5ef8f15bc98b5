"""The replicas screening prices: a request's replica of one shape, with the class's
speculative decoding, whether a model fits one node, and a screened replica's rate and
free HBM for the sessions fixed point (planner.candidates)."""

from __future__ import annotations

from catalog.schema import Catalog, Dtype
from planner import roofline as rl
from planner.candidates import sessions as ses
from planner.candidates.model import Candidate, ClassFigures, kv_dtype_for
from planner.errors import PlanningError
from planner.request import ResolvedClass, ResolvedRequest
from solver.problem import PoolRole


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


def rate_and_free_hbm(c: Candidate, fig: ClassFigures, capacity: float) -> tuple[float, float]:
    """A screened pool's rate per replica at full load (requests/s) and the KV bytes its
    HBM has free for idle prefixes (:func:`planner.candidates.sessions.cache_free_bytes`):
    an aggregated replica holds its decode batch, a prefill replica the percentile
    prompt in flight."""
    kv = c.replica.coefficients.kv_held_bytes
    if c.config.role == PoolRole.AGGREGATED:
        rate = min(c.decode_rps_per_replica or 0.0, c.prefill_rps_per_replica or 0.0)
        resident = (c.config.max_batch or 0) * kv(fig.decode_context_tokens)
    else:
        rate = c.prefill_rps_per_replica or 0.0
        resident = kv(fig.prompt_q_tokens)
    return rate, ses.cache_free_bytes(capacity, resident)
