"""Launch settings: the vLLM and SGLang arguments that realize a pool's configuration,
and the hosts one replica spans.
"""

from __future__ import annotations

import json
import math

from catalog.schema import Dtype
from planner import engines
from planner import kernels as kn
from planner.candidates import Candidate
from planner.plan.models import LaunchSettings, NodeLaunch
from planner.roofline import Replica, gpu_memory_bytes
from solver.problem import PoolRole


def sglang_launch_share(cand: Candidate) -> float:
    """The ``--mem-fraction-static`` that gives SGLang the pool's planned weights and KV
    cache (dimensionless): the replica's own share when it was planned on SGLang, else the
    planned share less the activation reserve kept inside it
    (:func:`planner.engines.sglang_share_for`; SGLang's share covers weights and KV only).
    Llama-3.1-70B FP8 planned at vLLM's 0.92 on H100s: 0.865, the same KV cache."""
    replica = cand.replica
    if engines.engine_profile(replica.engine).sizes_share_from_device:
        return replica.memory_utilization
    device_gb = gpu_memory_bytes(replica.gpu) / 1e9
    return engines.sglang_share_for(
        replica.memory_utilization, replica.activation_reserve_gb, device_gb
    )


def launch_settings(cand: Candidate, model_id: str) -> LaunchSettings:
    """Engine arguments for vLLM and SGLang that realize the pool's configuration
    (the model's Hugging Face repository when the catalog names one). Token budgets
    follow each engine's semantics (:func:`planner.engines.launch_token_budget`):
    vLLM's ``--max-num-batched-tokens`` is the chunk plus the max batch, SGLang's
    ``--chunked-prefill-size`` the chunk alone (with ``--enable-mixed-chunk`` so decodes
    share the prefill step, as the plan assumes). FP4 pools load the model's published
    FP4 checkpoint in a format the GPU runs (:func:`checkpoint_repo`); the engines read its
    quantization (NVFP4 or MXFP4) from the checkpoint's config, so no ``--quantization``
    is passed. FP8 pools quantize the BF16 weights on load (``--quantization=fp8``).
    SGLang's memory share is the plan's less the activations it keeps outside
    (:func:`sglang_launch_share`)."""
    cfg = cand.config
    model_id = checkpoint_repo(cand.replica) or model_id
    v = [
        "vllm",
        "serve",
        model_id,
        f"--tensor-parallel-size={cfg.tp // cfg.dp}",
        f"--gpu-memory-utilization={cand.replica.memory_utilization}",
    ]
    s = [
        "python",
        "-m",
        "sglang.launch_server",
        f"--model-path={model_id}",
        f"--tp-size={cfg.tp}",
        f"--mem-fraction-static={sglang_launch_share(cand)}",
    ]
    if cfg.pp > 1:
        v.append(f"--pipeline-parallel-size={cfg.pp}")
        s.append(f"--pp-size={cfg.pp}")
    if cfg.dp > 1:
        # vLLM: dp engines of tp/dp GPUs; SGLang: --tp-size counts all GPUs
        v.append(f"--data-parallel-size={cfg.dp}")
        s += ["--enable-dp-attention", f"--dp-size={cfg.dp}"]
    if cfg.ep > 1:
        v.append("--enable-expert-parallel")
        s.append(f"--ep-size={cfg.ep}")
    if cfg.dtype == Dtype.FP8:
        v.append("--quantization=fp8")
        s.append("--quantization=fp8")
    if cfg.kv_dtype.value == "fp8":
        v.append("--kv-cache-dtype=fp8")
        s.append("--kv-cache-dtype=fp8_e4m3")
    hv, hs = host_tier_args(cand.host_cache_gb, cand.replica.gpus)
    v += hv
    s += hs
    sv, ss = speculative_args(cand.replica.speculative)
    v += sv
    s += ss
    if cfg.max_batch:
        v.append(f"--max-num-seqs={cfg.max_batch}")
        s.append(f"--max-running-requests={cfg.max_batch}")
    if cfg.role == PoolRole.AGGREGATED:
        assert cfg.chunk_budget_tokens is not None
        # decode tokens per step: each running sequence verifies k + 1 with speculation
        spec = cand.replica.speculative
        batch = (cfg.max_batch or 0) * (spec.tokens_per_step if spec else 1)
        vllm_budget = engines.launch_token_budget(
            engines.engine_profile("vllm"), cfg.chunk_budget_tokens, batch
        )
        sglang_budget = engines.launch_token_budget(
            engines.engine_profile("sglang"), cfg.chunk_budget_tokens, batch
        )
        # vLLM counts every running decode in its budget: chunk + max batch (x (k + 1))
        v += ["--enable-chunked-prefill", f"--max-num-batched-tokens={vllm_budget}"]
        s.append(f"--chunked-prefill-size={sglang_budget}")
        if spec is None:  # SGLang refuses mixed chunks with speculative decoding
            s.append("--enable-mixed-chunk")
    elif cfg.role == PoolRole.PREFILL:
        v.append('--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_producer"}')
        s.append("--disaggregation-mode=prefill")
    else:
        v.append('--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_consumer"}')
        s.append("--disaggregation-mode=decode")
    nodes = nodes_per_replica(cfg.gpus, gpus_per_node(cand.replica.gpu))
    router = session_router(model_id) if cand.session_affinity else {}
    if nodes == 1:
        return LaunchSettings(vllm=v, sglang=s, router=router)
    per_node = []
    v_ray = [*v, "--distributed-executor-backend=ray"]
    for rank in range(nodes):
        # vLLM: one Ray cluster per replica (head on node 0), the server on the head.
        ray = (
            ["ray", "start", "--head", "--port=6379"]
            if rank == 0
            else ["ray", "start", "--address=HEAD_ADDR:6379", "--block"]
        )
        sr = [*s, f"--nnodes={nodes}", f"--node-rank={rank}", "--dist-init-addr=HEAD_ADDR:5000"]
        per_node.append(
            NodeLaunch(node_rank=rank, ray=ray, vllm=v_ray if rank == 0 else [], sglang=sr)
        )
    return LaunchSettings(
        vllm=v_ray,
        sglang=per_node[0].sglang,
        nodes_per_replica=nodes,
        per_node=per_node,
        router=router,
    )


def host_tier_args(host_cache_gb: float, gpus: int) -> tuple[list[str], list[str]]:
    """(vLLM, SGLang) arguments for a KV host tier of ``host_cache_gb`` GB per replica
    (``prefix_cache.host_tier``); empty without. vLLM's native offloading takes the
    replica's buffer in GiB (``--kv-offloading-size``); SGLang's HiCache a host pool
    per rank in GB (``--hicache-size``)."""
    if host_cache_gb <= 0:
        return [], []
    gib = int(host_cache_gb * 1e9 / 2**30)
    per_rank = int(host_cache_gb / max(gpus, 1))
    return (
        ["--kv-offloading-backend=native", f"--kv-offloading-size={gib}"],
        ["--enable-hierarchical-cache", f"--hicache-size={per_rank}"],
    )


def session_router(model_id: str) -> dict[str, list[str]]:
    """Router commands that keep a session's turns on one replica (its prefix stays
    there): the vLLM production-stack router with session routing on the
    ``x-session-id`` header, and the SGLang router's cache-aware policy (prefix
    affinity with load balancing). WORKER_URLS stands for the pool's replica URLs."""
    return {
        "vllm": [
            "vllm-router",
            "--service-discovery=static",
            "--static-backends=WORKER_URLS",
            f"--static-models={model_id}",
            "--routing-logic=session",
            "--session-key=x-session-id",
        ],
        "sglang": [
            "python",
            "-m",
            "sglang_router.launch_router",
            "--worker-urls",
            "WORKER_URLS",
            "--policy",
            "cache_aware",
        ],
    }


#: SGLang's ``--speculative-algorithm`` per method (EAGLE3; NEXTN runs DeepSeek's MTP
#: module; NGRAM looks drafts up in the context; STANDALONE runs a draft model).
SGLANG_SPEC_ALGORITHM = {
    kn.SpecMethod.EAGLE3: "EAGLE3",
    kn.SpecMethod.MTP: "NEXTN",
    kn.SpecMethod.NGRAM: "NGRAM",
    kn.SpecMethod.DRAFT_MODEL: "STANDALONE",
}


def speculative_args(spec: kn.Speculation | None) -> tuple[list[str], list[str]]:
    """(vLLM, SGLang) arguments for a pool's speculative decoding; empty without.

    vLLM: ``--speculative-config`` with ``method`` (eagle3, mtp, ngram, draft_model),
    ``model`` (the drafter's repository, when there is one) and
    ``num_speculative_tokens`` k (ngram adds ``prompt_lookup_max``). SGLang:
    ``--speculative-algorithm`` (:data:`SGLANG_SPEC_ALGORITHM`), the drafter's path,
    ``--speculative-num-steps`` k, ``--speculative-eagle-topk 1`` (a chain, as the
    plan prices it) and ``--speculative-num-draft-tokens`` k + 1 (the verified tokens,
    the bonus included)."""
    if spec is None:
        return [], []
    k = spec.draft_tokens
    config: dict[str, object] = {"method": spec.method.value}
    if spec.draft_repo:
        config["model"] = spec.draft_repo
    config["num_speculative_tokens"] = k
    if spec.method == kn.SpecMethod.NGRAM:
        config["prompt_lookup_max"] = 4
    vllm = [f"--speculative-config={json.dumps(config, separators=(',', ':'))}"]
    sglang = [f"--speculative-algorithm={SGLANG_SPEC_ALGORITHM[spec.method]}"]
    if spec.draft_repo:
        sglang.append(f"--speculative-draft-model-path={spec.draft_repo}")
    if spec.method != kn.SpecMethod.NGRAM:
        sglang += [f"--speculative-num-steps={k}", "--speculative-eagle-topk=1"]
    sglang.append(f"--speculative-num-draft-tokens={k + 1}")
    return vllm, sglang


def checkpoint_repo(replica: Replica) -> str | None:
    """The Hugging Face repository a pool's replica loads: for fp4 the model's published
    FP4 checkpoint in the first of the GPU's formats it has one in
    (:attr:`planner.roofline.Replica.fp4_checkpoint`: NVFP4 on Blackwell when published,
    MXFP4 on MI355X), else the model's ``hf_repo`` (None when the catalog names none)."""
    ckpt = replica.fp4_checkpoint
    if ckpt is not None:
        return ckpt.repo
    return replica.model.hf_repo


def gpus_per_node(gpu) -> int:
    """GPUs one host (one OS instance) holds: the catalog's ``server.gpus_per_node``
    when set (a GB200 NVL72 compute tray holds 4 of the rack's 72), else
    ``server.gpus_per_server``."""
    return gpu.server.gpus_per_node or gpu.server.gpus_per_server


def nodes_per_replica(gpus: int, per_node: int) -> int:
    """Hosts one replica of ``gpus`` GPUs (tp x pp) spans: ceil(gpus / GPUs per node)
    (>= 1)."""
    return max(1, math.ceil(gpus / max(1, per_node)))
