"""The Plan: what to run, what it costs, what it predicts, and why.

``plan_from_result`` turns a solver result and the screened candidates into
a :class:`Plan`. Every number in it comes from a named function here or in
the cost model (``roofline``, ``queueing``), whose docstring gives the
formula and units.

One module a job: ``models`` (the data), ``figures`` (per-pool predictions, $/token),
``launch`` (engine arguments), ``assemble`` (``plan_from_result``), ``explain``
(binding limits, infeasibility, why-not) and ``notes`` (what the plan assumed:
``assumed_notes``). Every name is importable from
``planner.plan`` itself.
"""

from planner.plan.assemble import (
    kv_pairs,
    operations_cost,
    plan_from_result,
    plan_margins,
    pool_capacities,
    risk_out,
    unmeasured_gpus,
)
from planner.plan.explain import (
    binding_detail,
    fill_gpu_seconds,
    infeasibility_reasons,
    relaxation_text,
    why_not,
)
from planner.plan.figures import (
    cost_per_million_tokens,
    percentile_batch,
    pool_tpot_ms,
    pool_ttft_ms,
    tokens_per_hour,
)
from planner.plan.launch import gpus_per_node, launch_settings, nodes_per_replica
from planner.plan.models import (
    HOURS_PER_MONTH,
    Alternative,
    BindingConstraint,
    ClassPlan,
    KvPair,
    LaunchSettings,
    Margins,
    NodeLaunch,
    OperationsCost,
    Out,
    Plan,
    PoolPlan,
    RiskOut,
    SloOut,
    SolverInfo,
    WhyNot,
)
from planner.plan.notes import (
    MEASURED_AGG_TTFT_EXTRA_MS,
    MEASURED_DISAGG_TTFT_EXTRA_MS,
    assumed_notes,
    disaggregated_ttft_line,
    notes_of,
    plan_assumed_notes,
)

__all__ = [
    "HOURS_PER_MONTH",
    "MEASURED_AGG_TTFT_EXTRA_MS",
    "MEASURED_DISAGG_TTFT_EXTRA_MS",
    "Alternative",
    "BindingConstraint",
    "ClassPlan",
    "KvPair",
    "LaunchSettings",
    "Margins",
    "NodeLaunch",
    "OperationsCost",
    "Out",
    "Plan",
    "PoolPlan",
    "RiskOut",
    "SloOut",
    "SolverInfo",
    "WhyNot",
    "assumed_notes",
    "binding_detail",
    "cost_per_million_tokens",
    "disaggregated_ttft_line",
    "fill_gpu_seconds",
    "gpus_per_node",
    "infeasibility_reasons",
    "kv_pairs",
    "launch_settings",
    "nodes_per_replica",
    "notes_of",
    "operations_cost",
    "percentile_batch",
    "plan_assumed_notes",
    "plan_from_result",
    "plan_margins",
    "pool_capacities",
    "pool_tpot_ms",
    "pool_ttft_ms",
    "relaxation_text",
    "risk_out",
    "tokens_per_hour",
    "unmeasured_gpus",
    "why_not",
]
