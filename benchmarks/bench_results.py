"""Write a benchmark's figures twice: JSON for machines, a markdown table for people."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
Column = tuple[str, Callable[[dict[str, Any]], Any]]


def machine_meta(**extra: Any) -> dict[str, Any]:
    return {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), **extra}


def write_table(
    stem: str,
    title: str,
    intro: list[str],
    meta: dict[str, Any],
    rows: list[dict[str, Any]],
    columns: list[Column],
) -> None:
    """``results/<stem>.json`` ({meta, rows}) and ``results/<stem>.md`` (title, intro, table)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = [f"# {title}", ""]
    for paragraph in intro:
        lines += [paragraph, ""]
    lines.append("| " + " | ".join(h for h, _ in columns) + " |")
    lines.append("|" + "---|" * len(columns))
    lines += ["| " + " | ".join(str(cell(r)) for _, cell in columns) + " |" for r in rows]
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")
