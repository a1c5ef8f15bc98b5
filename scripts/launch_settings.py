"""Engine settings a run was launched with that its measurement entry does not state.

``catalog/measurements/sources/launch-settings.json`` holds groups of measurement ids with
the settings their launch script gives them (``memory_utilization``: vLLM's
``gpu_memory_utilization``, SGLang's ``mem_fraction_static``; ``kv_dtype``: the KV-cache
format; ``checkpoint``: the published checkpoint loaded, one of the model's
``measured_checkpoints``; ``token_budget``: the tokens one step may hold, vLLM's
``max_num_batched_tokens``; ``max_batch``: the running-sequence cap, vLLM's
``max_num_seqs``, where the engine version the run used had other defaults than the
current one) and the script cited at a commit. :func:`apply_launch_settings` writes the
settings into the imported rows of those ids, so the point is priced at the memory its
engine was given instead of the engine's default (SGLang sizes its own share from the
device when not told: ``planner.engines.sglang_memory_share``).

A group naming an id that is not imported, a setting outside its range, a group without a
cited source, or an id whose entry already states a different value is refused with the
file, line and reason; the caller then writes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from catalog.schema import Catalog
from planner import roofline as rl
from planner.calibration import _array_entry_lines

#: The settings a group may carry: the memory share, a number in (0, 1]; the KV-cache
#: format, one of these (SGLang's ``--kv-cache-dtype fp8_e4m3`` is ``fp8``); the checkpoint;
#: the token budget per step (an integer >= 2) and the running-sequence cap (>= 1).
SETTINGS = ("memory_utilization", "kv_dtype", "checkpoint", "token_budget", "max_batch")
#: The least each integer setting may be (a step holds at least one decode and one prompt
#: token; a replica runs at least one sequence), as the measurement schema requires.
INTEGER_SETTINGS = {"token_budget": 2, "max_batch": 1}
KV_DTYPES = tuple(d.value for d in rl.KV_DTYPES)


def _setting_error(key: str, value: Any) -> str | None:
    """Why ``value`` is not a valid ``key`` setting, or None."""
    if key == "kv_dtype":
        return None if value in KV_DTYPES else f"kv_dtype must be one of {KV_DTYPES}, not {value!r}"
    if key == "checkpoint":
        ok = isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9][\w.\-]*/[\w.\-]+", value)
        return None if ok else f"checkpoint must be a repository owner/name, not {value!r}"
    if key in INTEGER_SETTINGS:
        least = INTEGER_SETTINGS[key]
        whole = isinstance(value, int) and not isinstance(value, bool) and value >= least
        return None if whole else f"{key} must be an integer >= {least}, not {value!r}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        return f"{key} must be a number in (0, 1], not {value!r}"
    return None


def _group_error(group: Any, known: set[str]) -> str | None:
    """Why a group cannot be applied, or None."""
    if not isinstance(group, dict):
        return "expected an object with ids, a setting and its source"
    ids = group.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        return "ids must be a non-empty list of measurement ids"
    unknown_ids = [i for i in ids if i not in known]
    if unknown_ids:
        return f"ids not imported: {', '.join(unknown_ids)}"
    source = group.get("source")
    if not isinstance(source, str) or not source.startswith("https://"):
        return "source must cite the launch script (an https:// address)"
    extra = set(group) - set(SETTINGS) - {"ids", "source", "note"}
    if extra:
        return f"unknown field(s) {', '.join(sorted(extra))} (settings: {', '.join(SETTINGS)})"
    named = [k for k in SETTINGS if k in group]
    if not named:
        return f"no setting given (one of: {', '.join(SETTINGS)})"
    return next((e for k in named if (e := _setting_error(k, group[k])) is not None), None)


def published_checkpoints(catalog: Catalog) -> dict[str, set[str]]:
    """The checkpoint repositories each model of ``catalog`` publishes: its
    ``fp4_checkpoints`` and ``measured_checkpoints``."""
    return {
        m.id: {c.repo for c in [*m.fp4_checkpoints, *m.measured_checkpoints]}
        for m in catalog.models.values()
    }


def apply_launch_settings(
    rows: list[dict[str, Any]],
    path: Path,
    bad: list[tuple[str, str]],
    checkpoints: Mapping[str, set[str]] | None = None,
) -> int:
    """Write each group's settings of ``path`` into the rows of its ids and cite its
    script in the row's note; returns how many rows were set. ``checkpoints``: the
    checkpoint repositories each model id publishes (``fp4_checkpoints`` and
    ``measured_checkpoints``); a ``checkpoint`` setting naming another for a row's model
    is refused (a typo would otherwise leave its runs unpriced). Refusals go to ``bad``
    as (``file:line``, reason) and then nothing is set."""
    text = path.read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        bad.append((f"{path}:{err.lineno}", f"not valid JSON: {err.msg}"))
        return 0
    groups = doc.get("settings") if isinstance(doc, dict) else None
    if not isinstance(groups, list):
        bad.append((f"{path}:1", 'expected {"settings": [...]}'))
        return 0
    lines = _array_entry_lines(text, "settings")
    by_id = {str(r["id"]): r for r in rows}
    changes: list[tuple[dict[str, Any], str, Any, str]] = []
    seen: dict[str, str] = {}
    for i, group in enumerate(groups):
        here = f"{path}:{lines[i] if i < len(lines) else 1}"
        why = _group_error(group, set(by_id))
        if why is not None:
            bad.append((here, why))
            continue
        for mid in group["ids"]:
            if mid in seen:
                bad.append((here, f"{mid} is already set by the group at {seen[mid]}"))
                continue
            seen[mid] = here
            for key in SETTINGS:
                if key not in group:
                    continue
                known = (checkpoints or {}).get(str(by_id[mid].get("model")))
                if key == "checkpoint" and known is not None and group[key] not in known:
                    bad.append(
                        (
                            here,
                            f"{mid}: {by_id[mid]['model']} has no checkpoint "
                            f"{group[key]} (known: {', '.join(sorted(known)) or 'none'})",
                        )
                    )
                    continue
                stated = by_id[mid].get(key)
                if stated is not None and stated != group[key]:
                    bad.append((here, f"{mid} states {key} {stated}, not the group's {group[key]}"))
                    continue
                changes.append((by_id[mid], key, group[key], group["source"]))
    if bad:
        return 0
    for row, key, value, source in changes:
        row[key] = value
        note = str(row.get("note", "")).rstrip()
        if note and not note.endswith("."):
            note += "."
        row["note"] = f"{note} Launched with {key} {value} ({source}).".strip()
    return len({id(row) for row, *_ in changes})
