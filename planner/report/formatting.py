"""How numbers, money and names read in a report (plain text; a dash when missing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from catalog.schema import Catalog
from planner.report import text as _text

# --------------------------------------------------------------------------- numbers


#: Short mode names for narrow table cells.
_MODE_SHORT = {"disaggregated": "split", "aggregated": "chunked"}


#: What a missing number prints as in the HTML and Markdown reports.
DASH = "–"
is_num = _text._is_num


def num(x: Any, digits: int = 0) -> str:
    return _text.num(x, digits, missing=DASH)


def usd(x: Any, digits: int = 2) -> str:
    return _text.usd(x, digits, missing=DASH)


def usd_short(x: Any) -> str:
    """$1.08M, $13.0M, $2.41B, $1,486: money at a glance."""
    if not is_num(x):
        return "–"
    a = abs(x)
    sign = "-" if x < 0 else ""
    if a >= 1e9:
        return f"{sign}${a / 1e9:,.2f}B"
    if a >= 1e7:
        return f"{sign}${a / 1e6:,.1f}M"
    if a >= 1e6:
        return f"{sign}${a / 1e6:,.2f}M"
    if a >= 100:
        return f"{sign}${a:,.0f}"
    return f"{sign}${a:,.2f}"


def usd_delta(x: Any) -> str:
    return _text.usd_delta(x, missing=DASH)


def pct(x: Any, digits: int = 0) -> str:
    """A share (0.25) as a percentage (25%)."""
    return _text.pct(x, digits, missing=DASH)


def pct_delta(x: Any) -> str:
    """A change already in percent (48.86) as +48.9%."""
    return f"{x:+.1f}%" if is_num(x) else "–"


def ms(x: Any) -> str:
    return _text.ms(x, missing=DASH)


def rps(x: Any) -> str:
    if not is_num(x):
        return "–"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.1f}" if abs(x) >= 1 else f"{x:.3g}"


def per_mtok(x: Any) -> str:
    return _text.per_mtok(x, missing=DASH)


def kw(x: Any) -> str:
    return f"{x:,.1f} kW" if is_num(x) else "–"


def yes_no(x: Any) -> str:
    return _text._yes_no(x, missing=DASH)


def s(x: Any) -> str:
    return _text._s(x, missing=DASH)


def _map(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


pool_class = _text.pool_class


def gpu_name(g: str, catalog: Catalog) -> str:
    spec = catalog.gpus.get(g)
    return spec.name if spec else g


def model_name(m: Any, catalog: Catalog) -> str:
    spec = catalog.models.get(str(m))
    return f"{spec.name} ({m})" if spec else s(m)
