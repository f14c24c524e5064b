"""Write a benchmark's figures twice: JSON for machines, a markdown table for people.

Every results file opens with what produced it: the command, the machine and the date
(``provenance``), taken from the JSON's meta, so a file re-rendered from its JSON
(``--from-json`` of each script) states the same facts as the run that wrote it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
Column = tuple[str, Callable[[dict[str, Any]], Any]]


def run_command() -> str:
    """The command line of this process as a user types it from the repository root."""
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(Path(__file__).resolve().parents[1])
    except ValueError:
        pass
    args = [a for a in sys.argv[1:] if a != "--from-json"]
    return " ".join(["python", shlex.quote(str(script)), *map(shlex.quote, args)])


def now_utc() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def machine_meta(**extra: Any) -> dict[str, Any]:
    """Machine, CPU count, date and command of this run, plus ``extra``."""
    return {
        "machine": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "date": now_utc(),
        "command": run_command(),
        **extra,
    }


def load_1min() -> str:
    """The 1-minute load average as a result cell (``?`` where the system has none): a figure
    measured on a busy machine says so beside it."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def provenance(meta: dict[str, Any]) -> list[str]:
    """The lines a results file opens with: command, machine, date (those the meta holds)."""
    lines = []
    if meta.get("command"):
        lines.append(f"Command: `{meta['command']}`")
    machine = meta.get("machine")
    if isinstance(machine, dict):  # scripts that record the machine as a mapping
        machine = ", ".join(f"{k} {v}" for k, v in machine.items())
    cpus = meta.get("cpus")
    if machine or cpus:
        lines.append(
            "Machine: " + ", ".join(str(p) for p in (machine, cpus and f"{cpus} CPUs") if p)
        )
    if meta.get("date"):
        lines.append(f"Date: {meta['date']}")
    return lines


def keep_run_facts(meta: dict[str, Any], run_meta: dict[str, Any] | None) -> dict[str, Any]:
    """``meta`` with the machine, CPU count, date and command of the run that wrote
    ``run_meta`` (a re-render from JSON states the run's facts, not the re-render's)."""
    if run_meta:
        meta.update(
            {k: run_meta[k] for k in ("machine", "cpus", "date", "command") if k in run_meta}
        )
    return meta


def load(stem: str) -> dict[str, Any]:
    """``results/<stem>.json`` as written."""
    return json.loads((RESULTS / f"{stem}.json").read_text())


def table(columns: list[Column], rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| " + " | ".join(h for h, _ in columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(str(cell(r)) for _, cell in columns) + " |" for r in rows]


def write_table(
    stem: str,
    title: str,
    intro: list[str],
    meta: dict[str, Any],
    rows: list[dict[str, Any]],
    columns: list[Column],
) -> None:
    """``results/<stem>.json`` ({meta, rows}) and ``results/<stem>.md`` (title, provenance,
    intro, table)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = [f"# {title}", ""]
    for paragraph in [*provenance(meta), *intro]:
        lines += [paragraph, ""]
    lines += table(columns, rows)
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")


def labelled_paths(ap: argparse.ArgumentParser, items: list[str]) -> list[tuple[str, str]]:
    """``LABEL=PATH`` arguments as ``(label, path)``; a missing label or path, or a path that does
    not exist, is the parser's usage error (exit 2), before anything is loaded."""
    out = []
    for item in items:
        label, _, path = item.partition("=")
        if not label or not path:
            ap.error(f"give LABEL=PATH (a run directory or checkpoint), got {item!r}")
        if not Path(path).exists():
            ap.error(f"{path}: no such run directory or checkpoint")
        out.append((label, path))
    return out


MIN_SEEDS = 3
"""A learning result quotes at least this many seeds (IQM and interval over fewer say little)."""


def seeds_lines(seeds_json: str | Path, label: str = "") -> list[str]:
    """Markdown of a multi-seed run (``rlinf train CONFIG --seeds N`` -> ``<out_dir>/seeds.json``):
    a sentence naming the seeds, then the IQM / 95 % interval / per-seed table, the same table
    ``seeds.md`` has, so a benchmark quotes the aggregate exactly as the run reported it."""
    from learner.eval.seed_report import seeds_table

    report = json.loads(Path(seeds_json).read_text())
    finished, failed = report.get("finished", []), report.get("failed", [])
    head = f"{label}: " if label else ""
    note = f"{len(finished)} seeds ({', '.join(map(str, finished))})"
    if len(finished) < MIN_SEEDS:
        note += f" -- fewer than {MIN_SEEDS}, read the interval as indicative only"
    if failed:
        note += "; failed: " + ", ".join(
            f"seed {f['seed']} (exit {f['exit_code']})" for f in failed
        )
    return [f"{head}IQM over {note}; 95% stratified bootstrap interval.", "", *seeds_table(report)]
