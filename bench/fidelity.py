"""How far the cost model's predictions are from measured serving, before and after
calibration.

For every point of ``catalog/measurements/reference.json`` (public measurements,
each with its source) it prints the measured output tokens/s, mean TTFT and mean
TPOT (or a kernel's time) next to the prediction

- *before*: with the analogy factors the catalog had before any calibration
  (``planner.calibration.UNCALIBRATED_DEFAULTS``);
- *after*: with a calibration fitted to all the points, per GPU and dtype (what
  ``fleetplan calibrate catalog/measurements/reference.json`` stores);

and the absolute percentage errors, then a summary per GPU and quantity, and the
error of the shipped defaults. Run: ``.venv/bin/python bench/fidelity.py``.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog.loader import load_catalog
from planner import calibration as cb

SHORT = {"output_tok_s": "tok/s", "ttft_ms": "TTFT", "tpot_ms": "TPOT", "layer_ms": "layer"}


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _shape(m: cb.Measurement) -> str:
    if m.kind == cb.MeasurementKind.KERNEL:
        return f"kernel {m.tokens} tok"
    load = (
        f"C={m.concurrency:g}"
        if m.concurrency is not None
        else "rate=inf"
        if m.request_rate_rps is not None and math.isinf(m.request_rate_rps)
        else f"rate={m.request_rate_rps:g}"
        if m.request_rate_rps is not None
        else "offline"
    )
    return f"{m.isl}/{m.osl} {load}"


def main() -> int:
    t0 = time.perf_counter()
    catalog = load_catalog()
    points = cb.load_reference_measurements(catalog)
    cal = cb.fit_calibration("reference", points, catalog)
    fitted = {(f.gpu, f.dtype): f.factors for f in cal.factors}
    rows = []
    header = (
        f"{'id':<6} {'gpu':<15} {'model':<14} {'tp':>2} {'dtype':<5} {'engine':<7} "
        f"{'shape':<20} {'qty':<6} {'measured':>9} {'before':>9} {'after':>9} "
        f"{'err before':>10} {'err after':>9}"
    )
    print(header)
    print("-" * len(header))
    for m in points:
        prior = cb.UNCALIBRATED_DEFAULTS.get(m.gpu)
        before = cb.predict(m, catalog, prior)
        after = cb.predict(m, catalog, fitted[(m.gpu, m.dtype)])
        shipped = cb.predict(m, catalog)
        for q, value in m.quantities().items():
            b, a, s = before.get(q), after.get(q), shipped.get(q)
            rows.append((m, q, cb.ape(b, value), cb.ape(a, value), cb.ape(s, value)))
            print(
                f"{m.id or '':<6} {m.gpu:<15} {m.model:<14} {m.tp:>2} {m.dtype.value:<5} "
                f"{(m.engine or '-'):<7} {_shape(m):<20} {SHORT[q]:<6} {_fmt(value):>9} "
                f"{_fmt(b):>9} {_fmt(a):>9} {_pct(cb.ape(b, value)):>10} "
                f"{_pct(cb.ape(a, value)):>9}"
            )
    print()
    print("fitted factors (per GPU and dtype; MFU / MBU / step overhead ms):")
    for f in cal.factors:
        held = [p for p in cb.PARAMS if not f.determined[p]]
        note = f" ({', '.join(held)} held at the catalog's)" if held else ""
        print(
            f"  {f.gpu} {f.dtype}: {f.prefill_mfu:g} / {f.decode_mbu:g} / "
            f"{f.step_overhead_ms:g}{note}, {f.points} points"
        )
    print()
    print("summary: absolute percentage error, median / worst (values)")
    print(f"  {'gpu':<15} {'quantity':<12} {'values':>6} {'before':>16} {'after':>16}")

    def summarize(sel) -> tuple[str, str, int]:
        b = [r[2] for r in sel if r[2] is not None]
        a = [r[3] for r in sel if r[3] is not None]
        fb = f"{_pct(median(b))} / {_pct(max(b))}" if b else "-"
        fa = f"{_pct(median(a))} / {_pct(max(a))}" if a else "-"
        return fb, fa, len(sel)

    for gpu in sorted({r[0].gpu for r in rows}):
        for q in ("output_tok_s", "ttft_ms", "tpot_ms", "layer_ms"):
            sel = [r for r in rows if r[0].gpu == gpu and r[1] == q]
            if sel:
                fb, fa, n = summarize(sel)
                print(f"  {gpu:<15} {SHORT[q]:<12} {n:>6} {fb:>16} {fa:>16}")
        fb, fa, n = summarize([r for r in rows if r[0].gpu == gpu])
        print(f"  {gpu:<15} {'all':<12} {n:>6} {fb:>16} {fa:>16}")
    fb, fa, n = summarize(rows)
    print(f"  {'all':<15} {'all':<12} {n:>6} {fb:>16} {fa:>16}")
    s = [r[4] for r in rows if r[4] is not None]
    print(
        f"  shipped catalog defaults (after make calibrate-defaults): median "
        f"{_pct(median(s))}, worst {_pct(max(s))}"
    )
    print(f"({len(points)} points, {n} values, {time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
