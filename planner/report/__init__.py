"""Render plans for people: text tables (``text``); more formats can join here."""

from planner.report.text import render_plan_text, render_table

__all__ = ["render_plan_text", "render_table"]
