"""DOMAIN.md's worked checks are first-order: one GEMM rate, the MFU, at every step size.
:func:`first_order_gpu` is a catalog GPU without the measured GEMM kernel rate and its
gain by token count (tests/test_gemm_peak_share.py and tests/test_gemm_token_gain.py test
those): an architecture nothing measures, so no rate is borrowed either."""

from __future__ import annotations

from catalog.kernel_floors import GemmTokenGain
from catalog.schema import Gpu

NO_GAIN = GemmTokenGain(
    by_engine={e: {"bf16": [1.0] * 4, "fp8": [1.0] * 4} for e in ("vllm", "sglang", "trtllm")},
    source="first-order: one GEMM rate at every step size (DOMAIN.md)",
)


def first_order_gpu(gpu: Gpu) -> Gpu:
    """``gpu`` with its GEMMs at the MFU at every step size (no lift, no gain)."""
    return gpu.model_copy(
        update={
            "gemm_token_gain": NO_GAIN,
            "gemm_peak_share": None,
            "arch": f"{gpu.arch} (first-order)",
        }
    )
