"""Checks on a problem and a set of replica counts, without a solve: classes no
candidate can serve, KV pairs over priced links, which fleet limits are set and
how much slack each has; and one pool per engine configuration in a solution
(:func:`merge_split_pools`).
"""

from __future__ import annotations

from dataclasses import replace

from solver.backend import TOL
from solver.problem import PoolCandidate, PoolRole, Problem, SolveResult
from solver.variables import modes_available, stock_row


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
        name = stock_row(gpu)
        slack[name] = cap - sum(c.gpus_per_replica * n for c, n in used if c.gpu == gpu)
    if lim.max_configurations is not None:
        keys = {c.config_key or c.id for c, _ in used}
        slack["max_configurations"] = lim.max_configurations - len(keys)
    if lim.max_gpu_types is not None:
        slack["max_gpu_types"] = lim.max_gpu_types - len({c.gpu for c, _ in used})
    if any(v < -TOL * max(1.0, abs(v)) for v in slack.values()):
        return None
    return slack


def merge_split_pools(problem: Problem, result: SolveResult) -> SolveResult:
    """One pool per class, role and engine configuration: where a solution spreads one
    configuration's replicas over several candidates (``config_key`` and checkpoint
    equal, and GPU, GPUs, cost and power per replica: the same deployment, e.g. a prefill
    pool priced over two KV links), all of them go to the one candidate that can carry
    the group's summed rate at the summed replica count (``PoolCandidate.capacity_rps``,
    what the MILP enforces; so the objective and every fleet row are unchanged), within
    its ``max_replicas`` and the request's ``max_replicas_per_pool``, with KV pairs still
    over priced links (:func:`pairs_respected`); the one with the most capacity at that
    count first (the faster KV link: more TTFT headroom), then the largest pool. The
    MILP is indifferent between such splits (equal cost), and a solve
    stopped at its gap may return one: the 80/20 example once planned 239 + 1 agent
    prefill replicas, the 1 at 0.03% load. A group no member can carry alone stays
    split. Returns ``result`` itself when nothing merges."""
    if not result.status.has_solution:
        return result
    by_id = {c.id: c for c in problem.candidates}
    replicas = {k: n for k, n in result.replicas.items() if n > 0}
    rates = dict(result.rates_rps)
    cap = problem.limits.max_replicas_per_pool
    groups: dict[tuple, list[PoolCandidate]] = {}
    for cid in replicas:
        c = by_id.get(cid)
        if c is not None and c.config_key:
            same = (c.gpu, c.gpus_per_replica, c.cost_usd_per_hour_per_replica)
            key = (c.class_id, c.role, c.config_key, c.checkpoint, same, c.power_kw_per_replica)
            groups.setdefault(key, []).append(c)
    merged = False
    for members in groups.values():
        if len(members) < 2:
            continue
        n = sum(replicas[m.id] for m in members)
        rate = sum(rates.get(m.id, 0.0) for m in members)
        ids = {m.id for m in members}
        order = sorted(members, key=lambda m: (-m.capacity_rps(n), -replicas[m.id], m.id))
        for target in order:
            if (
                n > target.max_replicas
                or (cap is not None and n > cap)
                or target.capacity_rps(n) < rate * (1 - 1e-9) - TOL
            ):
                continue
            trial = {k: v for k, v in replicas.items() if k not in ids}
            trial[target.id] = n
            if not pairs_respected(problem, trial):
                continue
            replicas = trial
            rates = {k: v for k, v in rates.items() if k not in ids} | {target.id: rate}
            merged = True
            break
    if not merged:
        return result
    return replace(result, replicas=replicas, rates_rps=rates)
