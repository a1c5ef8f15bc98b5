"""Render plans for people: text tables (``text``); procurement reports in
HTML, Markdown, CSV and JSON (``render``: ``render_plan_report``,
``render_comparison_report``, ``sensitivity``; loaded on first use, since the
charts pull in matplotlib)."""

from typing import Any

from planner.report.text import render_plan_text, render_table

__all__ = [
    "render_comparison_report",
    "render_plan_report",
    "render_plan_text",
    "render_table",
    "sensitivity",
]

_LAZY = {"render_plan_report", "render_comparison_report", "sensitivity"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from planner.report import render

        return getattr(render, name)
    raise AttributeError(f"module 'planner.report' has no attribute {name!r}")
