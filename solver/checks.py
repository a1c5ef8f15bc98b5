"""Checks on a problem and a set of replica counts, without a solve: classes no
candidate can serve, KV pairs over priced links, which fleet limits are set and
how much slack each has.
"""

from __future__ import annotations

from solver.backend import TOL
from solver.problem import PoolRole, Problem
from solver.variables import modes_available, safe_name


def unservable_classes(problem: Problem) -> list[str]:
    return [c.id for c in problem.classes if c.rate_rps > 0 and not modes_available(problem, c.id)]


def pairs_respected(problem: Problem, replicas: dict[str, int]) -> bool:
    """True when every used prefill pool's KV link reaches every decode GPU type its
    class uses (the kv_pair rows hold for these replica counts)."""
    by_id = {c.id: c for c in problem.candidates}
    used = [by_id[k] for k, n in replicas.items() if n > 0 and k in by_id]
    for pre in used:
        if pre.role != PoolRole.PREFILL or pre.pairs_with is None:
            continue
        for dec in used:
            if (
                dec.role == PoolRole.DECODE
                and dec.class_id == pre.class_id
                and dec.gpu not in pre.pairs_with
            ):
                return False
    return True


def has_limits(problem: Problem) -> bool:
    """True when the problem has any fleet limit the elastic re-solve can relax."""
    lim = problem.limits
    return (
        lim.budget_usd_per_hour is not None
        or lim.power_kw is not None
        or bool(lim.max_gpus)
        or lim.max_configurations is not None
        or lim.max_gpu_types is not None
        or lim.max_replicas_per_pool is not None
        or lim.min_replicas_per_pool > 1
    )


def limits_slack(problem: Problem, replicas: dict[str, int]) -> dict[str, float] | None:
    """Slack of each fleet limit for a set of replica counts; None if any is violated."""
    lim = problem.limits
    by_id = {c.id: c for c in problem.candidates}
    used = [(by_id[k], n) for k, n in replicas.items() if n > 0]
    slack: dict[str, float] = {}
    if lim.budget_usd_per_hour is not None:
        slack["budget"] = lim.budget_usd_per_hour - sum(
            c.cost_usd_per_hour_per_replica * n for c, n in used
        )
    if lim.power_kw is not None:
        slack["power"] = lim.power_kw - sum(c.power_kw_per_replica * n for c, n in used)
    for gpu, cap in lim.max_gpus.items():
        name = f"stock__{safe_name(gpu)}"
        slack[name] = cap - sum(c.gpus_per_replica * n for c, n in used if c.gpu == gpu)
    if lim.max_configurations is not None:
        keys = {c.config_key or c.id for c, _ in used}
        slack["max_configurations"] = lim.max_configurations - len(keys)
    if lim.max_gpu_types is not None:
        slack["max_gpu_types"] = lim.max_gpu_types - len({c.gpu for c, _ in used})
    if any(v < -TOL * max(1.0, abs(v)) for v in slack.values()):
        return None
    return slack
