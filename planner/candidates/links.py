"""What a replica costs and draws, the TP degrees offered, and the links KV caches
travel over between prefill and decode pools (planner.candidates)."""

from __future__ import annotations

from collections.abc import Iterable

from catalog.schema import Catalog, Link
from planner import architecture as arch
from planner import roofline as rl
from planner.candidates.model import DEFAULT_MAX_TP, KV_STREAM_OVERLAP

#: Most replicas one pool may have; a class needing more on one config is rejected there.

# --------------------------------------------------------------------------- helpers


def replica_cost_usd_per_hour(catalog: Catalog, gpu_id: str, gpus: int) -> float:
    """GPUs of the replica (tp x pp) x on-demand price per GPU-hour ($/hour)."""
    return gpus * catalog.gpus[gpu_id].price.usd_per_hour


def replica_power_kw(catalog: Catalog, gpu_id: str, gpus: int) -> float:
    """GPUs (tp x pp) x (TDP + server overhead / GPUs per server) / 1000 (kW at full load)."""
    gpu = catalog.gpus[gpu_id]
    per_gpu_w = gpu.tdp_w + gpu.server.server_overhead_w / gpu.server.gpus_per_server
    return gpus * per_gpu_w / 1000.0


def dp_ep_options(
    catalog: Catalog, model_id: str, gpu_id: str, tp: int, wanted: tuple[int, ...] | None
) -> list[tuple[int, int]]:
    """(dp, ep) pairs to screen at ``tp`` (pairs (1, 1): plain TP). For a mixture of
    experts, also data-parallel attention with expert parallelism over all ``tp`` GPUs
    (``dp = ep = tp``, as engines serve DeepSeek-class models) when ``tp >= 2``, ``tp``
    divides the expert count, and the GPUs share a scale-up link (no all-to-all over
    PCIe). ``wanted`` (the request's ``candidates.ep``) keeps only those ep values."""
    model, gpu = catalog.models[model_id], catalog.gpus[gpu_id]
    out = [(1, 1)]
    if (
        model.moe is not None
        and tp >= 2
        and model.moe.num_experts % tp == 0
        and rl.tp_link_id(gpu, tp) == gpu.scale_up_link
    ):
        out.append((tp, tp))
    if wanted:
        out = [(d, e) for d, e in out if e in wanted]
    return out


def pp_options(
    catalog: Catalog, gpu_id: str, tp: int, fits_alone: bool, wanted: tuple[int, ...] | None
) -> list[int]:
    """Pipeline-parallel degrees to screen at ``tp`` on ``gpu_id``: ``wanted`` (the
    request's ``candidates.pp``) when given; else 1, plus
    :data:`planner.roofline.PP_OPTIONS` when the model does not fit at the largest
    single-node TP (``fits_alone`` false) and ``tp`` is that TP (TP within a node,
    stages across nodes, as engines run models larger than a node)."""
    if wanted:
        return list(wanted)
    if fits_alone:
        return [1]
    gpu = catalog.gpus[gpu_id]
    node = gpu.server.gpus_per_node or gpu.server.gpus_per_server
    return [1, *rl.PP_OPTIONS] if tp == min(rl.max_tp(gpu), node) else [1]


def tp_options(catalog: Catalog, gpu_id: str, wanted: tuple[int, ...] | None) -> list[int]:
    """Powers of two up to the GPU's largest replica (its scale-up domain, or one server
    over PCIe: :func:`planner.roofline.max_tp`), and DEFAULT_MAX_TP unless asked."""
    domain = rl.max_tp(catalog.gpus[gpu_id])
    if wanted:
        return [t for t in wanted if t <= domain]
    out, t = [], 1
    while t <= min(domain, DEFAULT_MAX_TP):
        out.append(t)
        t *= 2
    return out


#: Scale-up domains at least this large (rack scale, e.g. NVL72) let a prefill and a
#: decode replica of the same GPU type share one NVLink domain.
RACK_SCALE_DOMAIN = 16


def _speed(link: Link) -> tuple[float, float]:
    """A link's order from slow to fast: bandwidth, then less latency."""
    return (link.bandwidth_gb_per_s, -link.latency_us)


def _slower(a: Link, b: Link) -> Link:
    """The slower of two links: less bandwidth, then more latency."""
    return min((a, b), key=_speed)


def kv_pair_link(catalog: Catalog, prefill_gpu: str, decode_gpu: str) -> Link:
    """Link a prefill replica on ``prefill_gpu`` ships its KV cache over to a decode
    replica on ``decode_gpu`` (a catalog Link):

    * the scale-up link (NVLink) only when both are the same GPU type on a
      rack-scale domain (>= RACK_SCALE_DOMAIN GPUs, e.g. NVL72): one NVLink
      domain, one vendor, one GPU type;
    * otherwise (other GPU types, other vendors, or separate servers) the
      network: the slower of the two GPUs' catalog ``network_link``.
    """
    a, b = catalog.gpus[prefill_gpu], catalog.gpus[decode_gpu]
    if (
        prefill_gpu == decode_gpu
        and a.scale_up_link
        and a.scale_up_domain_size >= RACK_SCALE_DOMAIN
    ):
        return catalog.links[a.scale_up_link]
    return _slower(catalog.links[a.network_link], catalog.links[b.network_link])


def kv_link_for(catalog: Catalog, gpu_id: str):
    """Link between a prefill and a decode replica of the same GPU type
    (:func:`kv_pair_link` of the GPU with itself)."""
    return kv_pair_link(catalog, gpu_id, gpu_id)


def same_vendor_gpus(catalog: Catalog, prefill_gpu: str, decode_gpus: Iterable[str]) -> list[str]:
    """The decode GPU types of ``decode_gpus`` a prefill replica on ``prefill_gpu`` may hand
    its KV cache to: those of its own vendor (its own type always among them when offered).
    A KV cache moves between engines of one software stack: CUDA and ROCm builds of
    vLLM, SGLang or TensorRT-LLM do not share a disaggregated-serving deployment (NIXL /
    the engines' KV connectors pair like workers), and the caches' formats differ (MI300X
    and MI325X keep FP8 as e4m3fnuz, NVIDIA GPUs as e4m3fn), so a plan never pairs a
    prefill pool of one vendor with a decode pool of another."""
    vendor = catalog.gpus[prefill_gpu].vendor.casefold()
    return [d for d in decode_gpus if catalog.gpus[d].vendor.casefold() == vendor]


def prefill_link_options(
    catalog: Catalog, prefill_gpu: str, decode_gpus: Iterable[str]
) -> list[tuple[Link, frozenset[str] | None]]:
    """The KV links a prefill replica on ``prefill_gpu`` may be priced on, each with
    the decode GPU types it may pair with (None: any):

    * only decode GPU types of its own vendor are priced (:func:`same_vendor_gpus`); the
      unrestricted option is narrowed to them where another vendor's decode candidates
      are screened (:func:`planner.candidates.prune.restrict_prefill_links`);
    * NVLink, when the GPU is rack-scale (:func:`kv_pair_link`) and offered for
      decode too: pairs only with decode pools of the same GPU type;
    * the network: the slowest :func:`kv_pair_link` to any decode GPU type offered
      (narrowed to those with screened decode candidates by
      :func:`restrict_prefill_links`), so every pairing is at least that fast;
    * the GPU's own NIC, when faster than that: pairs only with the decode GPU types it
      reaches at that speed (those whose NIC is at least as fast, its own type among
      them). A fleet of one GPU type is then priced on that type's own link whatever else
      is offered, so offering more GPU types never makes such a plan dearer (MI300X's
      eth-400g, not another type's eth-100g). One option, not one per link speed: each
      adds a copy of the GPU's prefill candidates to the MILP.
    """
    decode_gpus = same_vendor_gpus(catalog, prefill_gpu, decode_gpus)
    out: list[tuple[Link, frozenset[str] | None]] = []
    same = kv_pair_link(catalog, prefill_gpu, prefill_gpu)
    if prefill_gpu in decode_gpus and same.kind.value == "scale_up":
        out.append((same, frozenset([prefill_gpu])))
    own = catalog.links[catalog.gpus[prefill_gpu].network_link]
    pair = {
        d: own if d == prefill_gpu else kv_pair_link(catalog, prefill_gpu, d) for d in decode_gpus
    }
    slowest = min([*pair.values(), own], key=_speed)
    out.append((slowest, None))
    reach = frozenset(d for d, x in pair.items() if _speed(x) >= _speed(own))
    if _speed(own) > _speed(slowest) and reach and reach not in {r for _, r in out}:
        out.append((own, reach))  # (not when NVLink already serves that reach, faster)
    return out


def network_link_for_pairs(catalog: Catalog, prefill_gpu: str, decode_gpus: Iterable[str]) -> Link:
    """The slowest network pair link from ``prefill_gpu`` to any of ``decode_gpus``
    (:func:`kv_pair_link` across types; the GPU's own NIC for its own type)."""
    links = [catalog.links[catalog.gpus[prefill_gpu].network_link]]
    links += [kv_pair_link(catalog, prefill_gpu, d) for d in decode_gpus if d != prefill_gpu]
    return min(links, key=_speed)


def kv_exposed_ms(replica: rl.Replica, prefill_ms: float, prompt_tokens: float, link) -> float:
    """Exposed KV-transfer time (ms) of a ``prompt_tokens`` prompt prefilled in
    ``prefill_ms`` on ``replica``, shipped over ``link``: each of the tp GPUs ships
    its shard over its own link (bandwidth x tp x pp: every stage ships its layers),
    layer-wise streaming hides
    KV_STREAM_OVERLAP of it (``roofline.kv_transfer_ms``, ``exposed_transfer_ms``)."""
    kv_bytes = arch.kv_bytes_for_sequence(replica.model, prompt_tokens, replica.kv_dtype)
    transfer = rl.kv_transfer_ms(kv_bytes, link.bandwidth_gb_per_s * replica.gpus, link.latency_us)
    return rl.exposed_transfer_ms(
        transfer, prefill_ms, KV_STREAM_OVERLAP, num_layers=replica.model.num_layers
    )


def pair_link_ids(catalog: Catalog, prefill_gpu: str, decode_gpus) -> dict[str, str]:
    """The id of the KV link (:func:`kv_pair_link`) from a prefill replica on
    ``prefill_gpu`` to each decode GPU type of ``decode_gpus``."""
    return {d: kv_pair_link(catalog, prefill_gpu, d).id for d in decode_gpus}
