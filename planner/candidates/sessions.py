"""Prefix hits from capacity: the hit rate a pool can count on when its prefix cache
must hold the context of every idle session (DOMAIN.md section 8).

A class with ``sessions: {think_time_s, turns}`` sends ``turns`` requests per session,
idle ``think_time_s`` on average between them. Its nominal ``prefix_hit_rate`` h
says which share of a prompt repeats the previous turn; that share is a hit only if
the session's prefix is still in the KV cache of the replica its next turn reaches
(prefix-aware routing keeps a session on its replica). Per replica, at the rate
``lambda`` it carries:

* idle sessions (Little's law): ``N = lambda x (turns - 1) / turns x think_time_s``;
* bytes to keep them: ``N x KV_held(h x P_mean)`` (the held KV of the re-used prefix,
  TP replication included, :meth:`planner.kernels.StepCoefficients.kv_held_bytes`);
* bytes free for them: the KV cache left after the running work
  (:func:`cache_free_bytes`);
* share held: ``f = min(1, free / needed)``. With exponential think times and an LRU
  cache this share is also the probability that a session's prefix survives until
  its next turn (the cache keeps sessions idle less than some T: it holds
  ``1 - exp(-T / think)`` of them, which is the chance a think time is under T);
* effective hit rate: ``h_eff = h x f``.

``lambda`` itself grows with the hit rate (cached tokens are not prefilled), so
``h_eff`` is the fixed point of ``h = h_nominal x f(lambda(h))``, found by bisection
(:func:`effective_hit_rate`). ``lambda`` is the replica's full capacity (the most it
may carry), so ``f`` is the least the cache holds: conservative. Longer think times
or more turns only add idle sessions, so ``h_eff`` never rises with them, and it
never exceeds the nominal rate.

With a **host tier** (``prefix_cache.host_tier``: LMCache, vLLM's native offloading,
SGLang HiCache) the servers' CPU memory holds the idle prefixes HBM cannot
(:func:`host_cache_bytes`); a hit found there is reloaded over the GPU's host link
before its prefill (:func:`reload_ms`), which screening adds to the prefill time of
the share of requests whose prefix is in the host tier (:func:`host_hit_share`).

Inputs: ``think_time_s`` and ``turns`` are the user's (or the workload catalog's)
assumptions; KV bytes and capacity come from the model and GPU (catalog); a server's
CPU memory is a typical configuration (catalog ``server.host_memory_gb``, assumed);
the replica rate from screening. Not modelled: an SSD tier.
"""

from __future__ import annotations

from collections.abc import Callable

from catalog.schema import Catalog, Sessions
from planner import roofline as rl

#: Bisection steps for the fixed point (precision: nominal hit rate / 2^steps, 1.6% of
#: it; the result is the lower end, so a coarser search only errs low).
FIXED_POINT_STEPS = 6

#: Aggregated replicas with session-held prefixes are also screened with their decode
#: batch capped at these shares of the KV-limited batch: a smaller batch leaves KV
#: memory for idle prefixes (the optimizer then picks the cheaper trade-off).
SESSION_BATCH_SHARES = (0.5, 0.25)


def idle_sessions(rate_rps: float, sessions: Sessions) -> float:
    """Sessions idle between turns on a replica carrying ``rate_rps`` (sessions):
    ``rate x (turns - 1) / turns x think_time_s`` (Little's law; every turn but a
    session's last is followed by an idle wait)."""
    if rate_rps <= 0 or sessions.turns <= 1:
        return 0.0
    return rate_rps * (sessions.turns - 1.0) / sessions.turns * sessions.think_time_s


def cache_free_bytes(capacity_bytes: float, resident_bytes: float) -> float:
    """KV bytes a replica has for idle sessions' prefixes (bytes, >= 0): its KV
    capacity (:func:`planner.roofline.kv_capacity_bytes`) minus what its running work
    holds (an aggregated replica: its decode batch at the mean resident context; a
    prefill replica: the percentile prompt in flight)."""
    return max(capacity_bytes - resident_bytes, 0.0)


def host_cache_bytes(
    host_memory_gb: float | None, share: float, gpus: int, gpus_per_server: int
) -> float:
    """CPU memory a replica's KV host tier holds (bytes): ``host_memory_gb x 1e9 x share x
    gpus / gpus_per_server`` (the replica's share of its servers); 0 when the catalog
    gives no host memory."""
    if not host_memory_gb:
        return 0.0
    return host_memory_gb * 1e9 * share * gpus / gpus_per_server


def session_prefix_bytes(
    replica: rl.Replica, nominal_hit: float, prompt_mean_tokens: float
) -> float:
    """KV bytes an idle session keeps on ``replica`` (bytes): the held KV of its re-used
    prefix, ``nominal hit x mean prompt`` tokens (TP replication included)."""
    return replica.coefficients.kv_held_bytes(nominal_hit * prompt_mean_tokens)


def host_reload(catalog: Catalog, replica: rl.Replica, prefix_bytes: float) -> tuple[float, str]:
    """(:func:`reload_ms` of ``prefix_bytes`` over the replica's host link, that link's
    id): the GPU's ``pcie_link`` in the catalog (NVLink-C2C on GB200)."""
    link = catalog.links[replica.gpu.pcie_link]
    return (
        reload_ms(prefix_bytes, link.bandwidth_gb_per_s, replica.gpus, link.latency_us),
        link.id,
    )


def reload_ms(prefix_bytes: float, link_gb_per_s: float, gpus: int, latency_us: float) -> float:
    """Reloading one session's prefix from the host tier (ms): ``latency + bytes / (gpus x
    host-link bandwidth)`` (each GPU loads its own shard over its own link)."""
    if prefix_bytes <= 0:
        return 0.0
    return latency_us * 1e-3 + prefix_bytes / (gpus * link_gb_per_s * 1e9) * 1e3


def host_hit_share(
    free_bytes: float, host_bytes: float, idle: float, bytes_per_session: float
) -> float:
    """Share of the prefix hits served from the host tier (dimensionless): the most
    recent idle sessions stay in HBM (``free`` bytes), older ones in the host tier
    (``host`` bytes); of the ``held = min(idle x bytes, free + host)`` bytes kept,
    ``max(0, held - free) / held`` are in the host tier; 0 when HBM holds them all."""
    need = idle * bytes_per_session
    held = min(need, max(free_bytes, 0.0) + max(host_bytes, 0.0))
    if held <= 0:
        return 0.0
    return max(0.0, held - max(free_bytes, 0.0)) / held


def share_held(free_bytes: float, idle: float, bytes_per_session: float) -> float:
    """Share of idle sessions whose prefix the cache keeps (dimensionless, in [0, 1]):
    ``min(1, free / (idle x bytes per session))``; 1 when nothing needs keeping."""
    need = idle * bytes_per_session
    if need <= 0:
        return 1.0
    return min(1.0, max(free_bytes, 0.0) / need)


def effective_hit_rate(
    nominal: float,
    sessions: Sessions | None,
    state_at: Callable[[float], tuple[float, float, float] | None],
    steps: int = FIXED_POINT_STEPS,
) -> float:
    """The hit rate a pool can count on (dimensionless, ``0 <= h_eff <= nominal``).

    ``state_at(h)`` screens the pool as if its hit rate were ``h`` and returns
    ``(rate per replica rps, KV bytes free for idle prefixes, KV bytes per idle
    session)``, or None when the pool is infeasible at ``h``. The result is the
    largest tried ``h`` with ``h <= nominal x share_held(...)`` at ``h``: the cache
    then holds at least the prefixes that rate counts on (the third iterate of that map
    from the nominal rate when it is consistent, else a bisection of ``steps``
    halvings; 0 when even that fails). Fewer hits never make a pool feasible, so an
    ``h`` where the pool is infeasible (None) moves the search up; the pool is
    rejected when the result is still infeasible. Without sessions, or with no hits, the
    nominal rate (shared prefixes need no per-session memory)."""
    if sessions is None or nominal <= 0 or sessions.turns <= 1:
        return nominal

    def supported(h: float) -> float | None:
        state = state_at(h)
        if state is None:
            return None
        rate, free, per_session = state
        return nominal * share_held(free, idle_sessions(rate, sessions), per_session)

    top = supported(nominal)
    if top is None or top >= nominal:
        # infeasible even with every nominal hit (fewer never help; the caller's screening
        # rejects it), or the cache holds every idle prefix
        return nominal
    lo, hi = 0.0, nominal
    if top is not None:
        # g(h) = nominal x share_held(rate(h)) falls as h grows (more hits, a faster
        # replica, more idle sessions): g(nominal) is consistent (h <= g(h), checked) and
        # g(g(nominal)) lies above the fixed point, so the bisection starts from that
        # bracket and stops at the same precision (fewer screenings when it is narrow)
        h2 = supported(top)
        if h2 is not None and top <= h2:
            lo, hi = top, min(h2, nominal)
    precision = nominal / 2**steps
    while hi - lo > precision:
        mid = (lo + hi) / 2.0
        got = supported(mid)
        # infeasible at ``mid`` (too few hits for the TTFT SLO): the answer lies above
        if got is None or mid <= got:
            lo = mid
        else:
            hi = mid
    return lo


__all__ = [
    "FIXED_POINT_STEPS",
    "SESSION_BATCH_SHARES",
    "cache_free_bytes",
    "effective_hit_rate",
    "host_cache_bytes",
    "host_hit_share",
    "host_reload",
    "idle_sessions",
    "reload_ms",
    "session_prefix_bytes",
    "share_held",
]
