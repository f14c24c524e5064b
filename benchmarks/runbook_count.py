"""What an operator types to run online RL on the push twin: the runbook before and after.

Parses the shell code blocks of ``docs/robot_online_rl.md`` in two versions -- ``--before`` (a
commit, read with ``git show``: the runbook before ``rlinf online``) and the file as it is now --
and counts, for the push twin's commands (the blocks whose first command names
``configs/ros_sim_franka_push.yaml``, plus the ``export`` lines of their section):

- commands (``rlinf ...`` lines, continuation lines joined), terminals (long-running commands
  must run side by side: ``train``, ``serve``, ``ros up``, ``online``; ``collect`` ends first);
- ``key=value`` overrides, ``--flags``, exported variables, characters typed (comments and
  continuation backslashes left out, one space between words).

For every override in the current runbook (all its blocks, not only the twin's) the reason it
gives is listed: the comment lines above the command that name the key. One with no stated reason
is a finding (fix the runbook, or let the config carry the value). Writes
``benchmarks/results/runbook_count.{json,md}``.

    python benchmarks/runbook_count.py [--before 2bf92c8] [--run runs/ros_online_rlpd_push]

``--run`` adds what the one command reached: the run directory that ``rlinf online`` (the
runbook's command) wrote, read from its ``metrics.json`` (held-out success of the final
evaluation, robot transitions, the share of them that reached a gradient, wall time), with the
1-min load average range given by ``--load``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNBOOK = "docs/robot_online_rl.md"
RESULTS = ROOT / "benchmarks" / "results"
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_results import machine_meta  # noqa: E402

TWIN_GRAPH = "configs/ros_sim_franka_push.yaml"
LONG_RUNNING = ("train", "serve", "ros", "online")  # rlinf subcommands that run until stopped
OVERRIDE = re.compile(r"^[A-Za-z_][\w.\[\]]*=")


@dataclass
class Command:
    text: str  # one line, continuations joined
    comments: list[str]  # the comment lines right above it

    @property
    def words(self) -> list[str]:
        return self.text.split()

    @property
    def overrides(self) -> list[str]:
        return [w for w in self.words if OVERRIDE.match(w) and not w.startswith("A=")]

    @property
    def flags(self) -> list[str]:
        return [w for w in self.words if w.startswith("--")]

    @property
    def long_running(self) -> bool:
        return len(self.words) > 1 and self.words[1] in LONG_RUNNING


@dataclass
class Block:
    section: str
    commands: list[Command] = field(default_factory=list)
    exports: list[str] = field(default_factory=list)  # the export lines


def shell_blocks(markdown: str) -> list[Block]:
    """The fenced blocks that hold ``rlinf`` commands or ``export`` lines, with their section."""
    blocks, section, inside, lines = [], "", False, []
    for line in markdown.splitlines():
        if line.startswith("```"):
            if inside:
                block = parse_block(section, lines)
                if block.commands or block.exports:
                    blocks.append(block)
            inside, lines = not inside, []
        elif inside:
            lines.append(line)
        elif line.startswith("## "):
            section = line[3:].strip()
    return blocks


def parse_block(section: str, lines: list[str]) -> Block:
    block, comments, pending = Block(section), [], ""
    for raw in lines:
        line = raw.strip()
        if line.startswith("#"):
            comments.append(line.lstrip("# ").strip())
            continue
        pending = f"{pending} {line.rstrip(chr(92)).strip()}".strip()
        if line.endswith("\\"):
            continue
        if pending.startswith("export "):
            block.exports.append(" ".join(pending.split()))
        elif pending.startswith("rlinf "):
            block.commands.append(Command(" ".join(pending.split()), comments))
        pending, comments = "", []  # the comments above belong to this command
    return block


def twin(blocks: list[Block]) -> tuple[list[Command], list[str]]:
    """The push twin's commands (blocks whose first command runs its graph or its learner) and
    the exported variables of their sections."""
    chosen = [
        b
        for b in blocks
        if b.commands and TWIN_GRAPH in b.commands[0].words and "--role" not in b.commands[0].words
    ]
    sections = {b.section for b in chosen}
    exports = [v for b in blocks if b.section in sections for v in b.exports]
    return [c for b in chosen for c in b.commands], exports


def exported(lines: list[str]) -> list[str]:
    """The variable names of ``export A=1 B=2`` lines."""
    return [w.split("=", 1)[0] for line in lines for w in line.split()[1:] if "=" in w]


def reason(cmd: Command, key: str) -> str:
    """The clause (``;``-separated) of the comment above ``cmd`` that names ``key``, else ''."""
    named = re.compile(rf"(?<![\w.]){re.escape(key)}(?![\w])")
    return next((c.strip() for c in " ".join(cmd.comments).split(";") if named.search(c)), "")


def count(markdown: str) -> dict:
    commands, exports = twin(shell_blocks(markdown))
    return {
        "commands": len(commands),
        "terminals": max(1, sum(c.long_running for c in commands)) if commands else 0,
        "overrides": sum(len(c.overrides) for c in commands),
        "flags": sum(len(c.flags) for c in commands),
        "exported_variables": len(exported(exports)),
        "characters": sum(len(line) for line in [*exports, *(c.text for c in commands)]),
        "command_lines": [*exports, *(c.text for c in commands)],
    }


def overrides_with_reasons(markdown: str) -> list[dict]:
    out = []
    for block in shell_blocks(markdown):
        for cmd in block.commands:
            for word in cmd.overrides:
                key = word.split("=", 1)[0]
                out.append({"section": block.section, "override": word, "reason": reason(cmd, key)})
    return out


def run_figures(run_dir: Path) -> dict:
    """What a finished ``rlinf online`` run reached, from its ``metrics.json``."""
    final = json.loads((run_dir / "metrics.json").read_text())["final"]
    heldout = final.get("eval", {}).get("id", {})
    return {
        "run_dir": str(run_dir),
        "heldout_success": heldout.get("success_rate"),
        "heldout_episodes": heldout.get("episodes"),
        "robot_transitions": int(final.get("ingest/transitions", final.get("env_steps", 0))),
        "robot_episodes": int(final.get("episodes", 0)),
        "transitions_trained_share": final.get("learner/transitions_trained_share"),
        "utd_effective": final.get("learner/utd_effective"),
        "learner_updates": int(final.get("updates", 0)),
        "weight_pushes": int(final.get("push/pushes", 0)),
        "learner_wall_s": round(float(final.get("elapsed_s", 0.0)), 1),
    }


def render_run(run: dict, load: str) -> list[str]:
    share = run["transitions_trained_share"]
    return [
        "",
        "The one command, run to its budget (the learner config's `train.time_budget_s`):",
        "",
        "| | |",
        "|---|---:|",
        f"| held-out success (final eval) | {run['heldout_success']} "
        f"({run['heldout_episodes']} episodes) |",
        f"| robot transitions / episodes | {run['robot_transitions']:,} / "
        f"{run['robot_episodes']} |",
        f"| share of the robot's transitions that reached a gradient | "
        f"{'-' if share is None else f'{share:.3f}'} |",
        f"| learner updates / weight pushes | {run['learner_updates']:,} / "
        f"{run['weight_pushes']} |",
        f"| learner wall time | {run['learner_wall_s']} s |",
        *([f"| 1-min load average during the run | {load} |"] if load else []),
    ]


def render(before: dict, after: dict, rev: str, reasons: list[dict]) -> str:
    rows = ("commands", "terminals", "overrides", "flags", "exported_variables", "characters")
    lines = [
        "# Runbook: what an operator types to run online RL on the push twin",
        "",
        f"`{RUNBOOK}` at `{rev}` (before `rlinf online`) and now; `benchmarks/runbook_count.py`.",
        "",
        "| | before | now |",
        "|---|---:|---:|",
        *(f"| {r.replace('_', ' ')} | {before[r]} | {after[r]} |" for r in rows),
        "",
        "Before:",
        "",
        *(f"    {c}" for c in before["command_lines"]),
        "",
        "Now:",
        "",
        *(f"    {c}" for c in after["command_lines"]),
        "",
        "Every override the current runbook still gives, with the reason it states:",
        "",
        "| section | override | reason given |",
        "|---|---|---|",
        *(
            f"| {r['section']} | `{r['override']}` | {r['reason'] or '**none stated**'} |"
            for r in reasons
        ),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--before", default="2bf92c8", help="commit of the runbook before (git show)")
    ap.add_argument("--out", default=str(RESULTS), help="results directory")
    ap.add_argument("--run", default=None, help="the run directory `rlinf online` wrote")
    ap.add_argument("--load", default="", help="the 1-min load range during that run")
    args = ap.parse_args(argv)
    run_dir = Path(args.run) if args.run else None
    if run_dir is not None and not (run_dir / "metrics.json").is_file():
        print(f"runbook_count: --run {run_dir} holds no metrics.json (a finished run writes it)")
        return 2
    try:
        old = subprocess.run(
            ["git", "show", f"{args.before}:{RUNBOOK}"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except subprocess.CalledProcessError as e:
        print(f"runbook_count: git show {args.before}:{RUNBOOK} failed: {e.stderr.strip()}")
        return 2
    now = (ROOT / RUNBOOK).read_text()
    before, after = count(old), count(now)
    reasons = overrides_with_reasons(now)
    run = run_figures(run_dir) if run_dir is not None else None
    result = {
        "before_commit": args.before,
        "before": before,
        "now": after,
        "overrides": reasons,
        "run": run,
        "load": args.load,
        "meta": machine_meta(),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runbook_count.json").write_text(json.dumps(result, indent=1) + "\n")
    meta = result["meta"]
    text = render(before, after, args.before, reasons)
    text += (
        f"\nCommand: `{meta['command']}`; machine: {meta['machine']}, {meta['cpus']} CPUs; "
        f"date: {meta['date']}\n"
    )
    if run is not None:
        text += "\n".join(render_run(run, args.load)) + "\n"
    (out / "runbook_count.md").write_text(text)
    print(text, end="")
    missing = [r["override"] for r in reasons if not r["reason"]]
    if missing:
        print(f"runbook_count: overrides with no stated reason: {', '.join(missing)}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
