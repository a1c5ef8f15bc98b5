"""Launch settings: the vLLM and SGLang arguments that realize a pool's configuration,
and the hosts one replica spans.
"""

from __future__ import annotations

import math

from planner import engines
from planner.candidates import Candidate
from planner.plan.models import LaunchSettings, NodeLaunch
from solver.problem import PoolRole


def launch_settings(cand: Candidate, model_id: str) -> LaunchSettings:
    """Engine arguments for vLLM and SGLang that realize the pool's configuration
    (the model's Hugging Face repository when the catalog names one). Token budgets
    follow each engine's semantics (:func:`planner.engines.launch_token_budget`):
    vLLM's ``--max-num-batched-tokens`` is the chunk plus the max batch, SGLang's
    ``--chunked-prefill-size`` the chunk alone (with ``--enable-mixed-chunk`` so decodes
    share the prefill step, as the plan assumes)."""
    cfg = cand.config
    model_id = cand.replica.model.hf_repo or model_id
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
        f"--mem-fraction-static={cand.replica.memory_utilization}",
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
    if cfg.dtype.value in ("fp8", "fp4"):
        v.append("--quantization=fp8" if cfg.dtype.value == "fp8" else "--quantization=mxfp4")
        s.append("--quantization=fp8" if cfg.dtype.value == "fp8" else "--quantization=mxfp4")
    if cfg.kv_dtype.value == "fp8":
        v.append("--kv-cache-dtype=fp8")
        s.append("--kv-cache-dtype=fp8_e4m3")
    if cfg.max_batch:
        v.append(f"--max-num-seqs={cfg.max_batch}")
        s.append(f"--max-running-requests={cfg.max_batch}")
    if cfg.role == PoolRole.AGGREGATED:
        assert cfg.chunk_budget_tokens is not None
        batch = cfg.max_batch or 0
        vllm_budget = engines.launch_token_budget(
            engines.engine_profile("vllm"), cfg.chunk_budget_tokens, batch
        )
        sglang_budget = engines.launch_token_budget(
            engines.engine_profile("sglang"), cfg.chunk_budget_tokens, batch
        )
        # vLLM counts every running decode in its budget: chunk + max batch
        v += ["--enable-chunked-prefill", f"--max-num-batched-tokens={vllm_budget}"]
        s += [f"--chunked-prefill-size={sglang_budget}", "--enable-mixed-chunk"]
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


def gpus_per_node(gpu) -> int:
    """GPUs one host (one OS instance) holds: the catalog's ``server.gpus_per_node``
    when set (a GB200 NVL72 compute tray holds 4 of the rack's 72), else
    ``server.gpus_per_server``."""
    return gpu.server.gpus_per_node or gpu.server.gpus_per_server


def nodes_per_replica(gpus: int, per_node: int) -> int:
    """Hosts one replica of ``gpus`` GPUs (tp x pp) spans: ceil(gpus / GPUs per node)
    (>= 1)."""
    return max(1, math.ceil(gpus / max(1, per_node)))
