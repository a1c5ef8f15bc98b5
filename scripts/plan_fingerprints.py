"""Plan every shipped example and fingerprint the result, to compare two checkouts.

A change meant to be a pure speed-up (screening, the MILP) must leave every plan as
it was: the same cost and pools, and the same screening to the float. Run it on the
checkout before the change and on the one after, then compare:

    git archive <before> | tar -x -C /tmp/before
    .venv/bin/python scripts/plan_fingerprints.py dump before.json --root /tmp/before
    .venv/bin/python scripts/plan_fingerprints.py dump after.json
    .venv/bin/python scripts/plan_fingerprints.py compare before.json after.json

``dump`` plans each ``examples/*.yaml`` (a comparison's ``base``) without
alternatives or verification and records its status, cost ($/hour), gap, pools (id
and replicas) and a hash of its screening: every candidate's figures (batch, step,
service, segments, cuts, hit rate) and every rejection. ``compare`` prints one line
per example and exits 1 when a cost or the pools differ (a screening hash that
differs is reported; a cost within ``--rel-gap`` counts as equal).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def dump(out: Path, root: Path) -> None:
    """Plan each example of ``root`` with ``root``'s code and write the fingerprints."""
    sys.path.insert(0, str(root))
    import yaml

    from catalog.loader import load_catalog
    from planner.candidates import screen_candidates
    from planner.problem_build import parse_request
    from planner.request import resolve_request
    from planner.service import make_plan

    cat = load_catalog()
    rows: dict[str, Any] = {}
    for path in sorted((root / "examples").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        doc = doc.get("base", doc)
        t0 = time.perf_counter()
        plan = make_plan(doc, cat, alternatives=False, verify=False)
        seconds = time.perf_counter() - t0
        screening = ""
        if not doc.get("scenarios"):
            sc = screen_candidates(resolve_request(parse_request(doc), cat), cat)
            figures = sorted(
                repr(
                    (
                        c.id,
                        c.config.max_batch,
                        c.step_ms,
                        c.service_mean_ms,
                        c.service_cv2,
                        c.service_q_ms,
                        c.transfer_exposed_ms,
                        c.max_replicas,
                        c.segments,
                        c.cuts,
                        c.effective_prefix_hit_rate,
                        c.host_hit_share,
                    )
                )
                for c in sc.candidates + sc.pruned
            )
            rejected = sorted(repr(r) for r in sc.rejections)
            screening = hashlib.sha256(repr((figures, rejected)).encode()).hexdigest()[:16]
        rows[path.name] = {
            "status": plan.solver.status.value,
            "cost_usd_per_hour": plan.cost_usd_per_hour,
            "gap": plan.solver.gap,
            "pools": sorted([p.id, p.replicas] for p in plan.pools),
            "screening": screening,
            "seconds": round(seconds, 3),
        }
        print(path.name, plan.solver.status.value, plan.cost_usd_per_hour, screening, flush=True)
    out.write_text(json.dumps(rows, indent=1))


def compare(before: Path, after: Path, rel_gap: float) -> int:
    """Print each example's before and after; 1 when a cost or the pools differ."""
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    bad = 0
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name, {}), b.get(name, {})
        cx, cy = x.get("cost_usd_per_hour"), y.get("cost_usd_per_hour")
        same_cost = (cx is None and cy is None) or (
            cx is not None and cy is not None and abs(cx - cy) <= rel_gap * max(abs(cx), 1e-9)
        )
        same_pools = x.get("pools") == y.get("pools")
        same_screening = x.get("screening") == y.get("screening")
        bad += not (same_cost and same_pools)
        print(
            f"{name}: cost {cx} -> {cy} ({'same' if same_cost else 'DIFFERS'}), pools "
            f"{'same' if same_pools else 'DIFFER'}, screening "
            f"{'same' if same_screening else 'DIFFERS'}, {x.get('seconds')} s -> "
            f"{y.get('seconds')} s"
        )
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="plan the examples and write their fingerprints")
    d.add_argument("out", type=Path)
    d.add_argument("--root", type=Path, default=ROOT, help="the checkout to plan with")
    c = sub.add_parser("compare", help="compare two dumps")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--rel-gap", type=float, default=0.001)
    args = parser.parse_args()
    if args.command == "dump":
        dump(args.out, args.root.resolve())
        return 0
    return compare(args.before, args.after, args.rel_gap)


if __name__ == "__main__":
    sys.exit(main())
