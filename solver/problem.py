"""The MILP's data: index sets and parameters, as frozen dataclasses.

The solver package imports nothing of the project. The planner turns the
catalog, the request and the cost model into a :class:`Problem`; the solver
turns a Problem into a :class:`SolveResult`.

Index sets
    K  traffic classes (``ClassDemand``), each with a rate in requests/s.
    J  pool candidates (``PoolCandidate``): one class, one role, one
       configuration (GPU type, TP, dtype, chunk budget, max batch).
    G  GPU types (the ``gpu`` of the candidates).

A pool is dedicated to one class, so its queueing curve is that class's; a
class may spread its load over several pools of its mode.

Capacity of a pool with n replicas, in requests/s of its class, is

    capacity(n) = min( min_i cut_i(n),  segment_s(n) for the segment s holding n )

Every ``cut`` is a line that always holds (e.g. decode slots, linear in n).
The ``segments`` describe a convex, increasing queueing curve f(n)
(multi-server queues gain utilization with more servers: square-root
staffing makes f convex). Segment s covers replica counts [a_s, b_s] and
uses the chord of f through (a_s, a_s + 1), which for convex f lies below f
at every integer: exact at a_s and a_s + 1, conservative up to b_s. The MILP
picks one segment per used pool (a multiple-choice, convex-hull formulation,
much tighter than big-M disjunctions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class PoolRole(StrEnum):
    """What a pool's replicas do."""

    AGGREGATED = "aggregated"  # chunked prefill + decode on the same replicas
    PREFILL = "prefill"  # disaggregated: prefill only, ships KV to decode
    DECODE = "decode"  # disaggregated: decode only


class Mode(StrEnum):
    """How a traffic class is served."""

    AGGREGATED = "aggregated"
    DISAGGREGATED = "disaggregated"


class Objective(StrEnum):
    MIN_COST = "min_cost"
    MAX_GOODPUT = "max_goodput"


#: The shortest time limit worth handing HiGHS, seconds: a solve with less time left
#: than this is not started (or is given this much).
MIN_SOLVE_TIME_S = 0.05


class SolveStatus(StrEnum):
    OPTIMAL = "optimal"
    FEASIBLE = "feasible"  # an incumbent, gap not closed (time limit)
    INFEASIBLE = "infeasible"
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        """A fleet came out: optimal, or feasible with the gap not closed."""
        return has_solution(self)


def has_solution(status: str | None) -> bool:
    """Whether a status (a :class:`SolveStatus`, or a stored plan's ``"status"``
    string) carries a fleet: ``optimal`` or ``feasible``."""
    return status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)


@dataclass(frozen=True)
class CapacityCut:
    """rate_rps <= intercept_rps + slope_rps_per_replica * replicas."""

    intercept_rps: float
    slope_rps_per_replica: float


@dataclass(frozen=True)
class Segment:
    """On replica counts [start, end]: rate_rps <= intercept + slope * replicas."""

    start_replicas: int
    end_replicas: int
    intercept_rps: float
    slope_rps_per_replica: float


def segments_capacity_rps(segments: tuple[Segment, ...], replicas: int) -> float:
    """The capacity (requests/s) a pool's segment rows allow ``replicas`` replicas, as the
    MILP enforces it: the best segment holding ``replicas`` (its intercept + slope x
    replicas); 0 where none holds it."""
    held = [
        s.intercept_rps + s.slope_rps_per_replica * replicas
        for s in segments
        if s.start_replicas <= replicas <= s.end_replicas
    ]
    return max(held) if held else 0.0


@dataclass(frozen=True)
class ClassDemand:
    """A traffic class: its rate and the modes it may be served in."""

    id: str
    rate_rps: float
    modes: tuple[Mode, ...] = (Mode.AGGREGATED, Mode.DISAGGREGATED)


@dataclass(frozen=True)
class PoolCandidate:
    """A screened, feasible pool configuration for one class.

    ``cuts`` and ``chords`` give the pool's capacity in requests/s of its
    class at n replicas (see the module docstring). ``config_key`` identifies
    the engine configuration (role, GPU, TP, dtype, budgets) so the "at most K
    configurations" rule counts identical configurations across classes once.
    """

    id: str
    class_id: str
    role: PoolRole
    gpu: str
    gpus_per_replica: int
    cost_usd_per_hour_per_replica: float
    power_kw_per_replica: float
    cuts: tuple[CapacityCut, ...]
    max_replicas: int
    config_key: str = ""
    segments: tuple[Segment, ...] = ()
    checkpoint: str = ""  # weights + KV format; disaggregated pairs must match
    #: Prefill pools: the decode GPU types its priced KV link reaches (None: any).
    pairs_with: frozenset[str] | None = None

    def capacity_rps(self, replicas: int) -> float:
        """Capacity at ``replicas`` (requests/s): min over cuts and, when the
        pool has a queueing curve, the best segment holding ``replicas``; 0 at
        0 replicas or beyond the segments. Exactly what the MILP enforces."""
        if replicas <= 0:
            return 0.0
        caps = [c.intercept_rps + c.slope_rps_per_replica * replicas for c in self.cuts]
        if self.segments:
            caps.append(segments_capacity_rps(self.segments, replicas))
        return max(0.0, min(caps)) if caps else 0.0


@dataclass(frozen=True)
class Limits:
    """Fleet-wide constraints; None means no limit."""

    budget_usd_per_hour: float | None = None
    max_gpus: dict[str, int] = field(default_factory=dict)
    power_kw: float | None = None
    min_replicas_per_pool: int = 1
    max_configurations: int | None = None
    max_gpu_types: int | None = None
    max_replicas_per_pool: int | None = None


@dataclass(frozen=True)
class Operations:
    """What variety costs to run, $/hour: per GPU type used, per distinct configuration."""

    usd_per_hour_per_gpu_type: float = 0.0
    usd_per_hour_per_configuration: float = 0.0

    @property
    def active(self) -> bool:
        return self.usd_per_hour_per_gpu_type > 0 or self.usd_per_hour_per_configuration > 0

    def cost_usd_per_hour(self, gpu_types: int, configurations: int) -> float:
        """usd_per_hour_per_gpu_type x GPU types + usd_per_hour_per_configuration x
        configurations ($/hour)."""
        return (
            self.usd_per_hour_per_gpu_type * gpu_types
            + self.usd_per_hour_per_configuration * configurations
        )


@dataclass(frozen=True)
class Problem:
    classes: tuple[ClassDemand, ...]
    candidates: tuple[PoolCandidate, ...]
    limits: Limits = field(default_factory=Limits)
    objective: Objective = Objective.MIN_COST
    operations: Operations = field(default_factory=Operations)

    @property
    def couples_classes(self) -> bool:
        """True when a fleet-wide term links the classes beyond budget/stock/power:
        operations costs or a GPU-type cap (then the class-by-class solve is not exact)."""
        return self.operations.active or self.limits.max_gpu_types is not None

    def gpu_cost_usd_per_hour(self, replicas: dict[str, int]) -> float:
        """The GPUs' cost ($/hour) of a fleet given as replicas per candidate id: the sum
        of each candidate's cost per replica x replicas (what a budget limits; the
        operations costs are apart, :meth:`operations_cost_usd_per_hour`)."""
        by_id = {c.id: c for c in self.candidates}
        return sum(by_id[k].cost_usd_per_hour_per_replica * n for k, n in replicas.items())

    def operations_cost_usd_per_hour(self, replicas: dict[str, int]) -> float:
        """Operations cost ($/hour) of a fleet given as replicas per candidate id:
        :meth:`Operations.cost_usd_per_hour` of its GPU types and configurations."""
        by_id = {c.id: c for c in self.candidates}
        used = [by_id[k] for k, n in replicas.items() if n > 0 and k in by_id]
        return self.operations.cost_usd_per_hour(
            len({c.gpu for c in used}), len({c.config_key or c.id for c in used})
        )

    def candidates_of(self, class_id: str, role: PoolRole | None = None) -> list[PoolCandidate]:
        return [
            c
            for c in self.candidates
            if c.class_id == class_id and (role is None or c.role == role)
        ]


@dataclass(frozen=True)
class SolverOptions:
    time_limit_s: float = 10.0
    rel_gap: float = 0.001
    solver: str = "highs"  # or "cbc"
    threads: int | None = None
    decompose: bool = True  # try class-by-class first (exact when limits allow)
    # settle a budget-only least-cost problem without its budget row first
    # (solver.solve._budget_first); off inside the solves that follow it
    budget_first: bool = True


@dataclass(frozen=True)
class SolveResult:
    status: SolveStatus
    objective: float | None
    gap: float | None
    runtime_s: float
    solver: str
    replicas: dict[str, int] = field(default_factory=dict)  # candidate id -> replicas
    rates_rps: dict[str, float] = field(default_factory=dict)  # candidate id -> class rate
    modes: dict[str, Mode] = field(default_factory=dict)  # class id -> mode
    served_rps: dict[str, float] = field(default_factory=dict)  # class id -> served rate
    binding: tuple[str, ...] = ()  # names of limit rows with no slack
    relaxation: dict[str, float] = field(default_factory=dict)  # limit -> amount to relax
    # limit -> how far it alone must move, the others held (budget, power, stock)
    relaxation_alone: dict[str, float] = field(default_factory=dict)
    message: str = ""
    num_variables: int = 0
    num_constraints: int = 0
