"""Agentic demo table: does RL teach what the supervised data cannot? One command:

    .venv/bin/python benchmarks/llm_agentic.py

Runs ``configs/llm_agentic_tools.yaml`` (easy-problem demonstrations only; RL on hard problems
with no demonstrations; math-verify outcome reward) as four reasoning-runner runs on this machine:

1. SFT on the demonstrations (``train.steps=0``), evaluated every ``sft.eval_every`` steps;
2. (c) SFT + RL with the calculator, from run 1's checkpoint;
3. (b) SFT + RL without tools (``agent.disable_execution``: a call ends the episode unanswered);
4. SFT continued on the same demonstrations for at least the wall time RL took in run 2;
5. SFT on the tool-using demonstrations only (a filter a human could apply: "always call").

Row (a) is the *best* held-out accuracy of any SFT checkpoint of runs 1, 4 and 5 (best-of, chosen
on the held-out set itself, which favours SFT), with at least the compute of (c). All accuracies are
greedy, on held-out hard pairs that appear in neither the SFT nor the RL data. Writes
``benchmarks/results/llm_agentic.{json,md,png}``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from learner.runners.reasoning import ReasoningConfig, run  # noqa: E402
from learner.runners.reasoning_io import read_curve  # noqa: E402
from rlinf_contracts.config import from_dict, load_config  # noqa: E402

CONFIG = ROOT / "configs/llm_agentic_tools.yaml"
OUT = ROOT / "benchmarks/results"
RUNS = ROOT / "runs/llm_agentic_bench"
EVAL = ["data.eval_limit=600"]


def _run(name: str, overrides: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]], float]:
    t0 = time.perf_counter()
    cfg = from_dict(
        ReasoningConfig, load_config(CONFIG, [*EVAL, *overrides, f"train.out_dir={RUNS / name}"])
    )
    result = run(cfg, None)
    return result, read_curve(Path(result["csv"])), time.perf_counter() - t0


def _evals(rows: list[dict[str, Any]], phase: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["phase"] == phase and "eval/accuracy" in r]


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    sft, sft_rows, t_sft = _run("sft", ["train.steps=0"])
    ckpt = f"model.path={sft['checkpoint']}"
    tools, tool_rows, t_tools = _run("rl_tools", [ckpt, "sft.steps=0"])
    notools, notool_rows, t_notools = _run(
        "rl_no_tools", [ckpt, "sft.steps=0", "agent.disable_execution=true"]
    )
    rl_seconds = max(float(r["elapsed_s"]) for r in tool_rows)
    sft_rate = float(_evals(sft_rows, "sft")[-1]["sft/step"]) / max(
        1e-9, sum(float(r["sft/seconds"]) for r in _evals(sft_rows, "sft"))
    )
    extra = max(100, int(rl_seconds * sft_rate * 1.2) // 100 * 100 + 100)
    more, more_rows, t_more = _run(
        "sft_more",
        [ckpt, f"sft.steps={extra}", "sft.eval_every=100", "sft.lr=1.0e-3", "train.steps=0"],
    )
    filtered = RUNS / "tool_only_demos.jsonl"
    demos = (RUNS / "sft/data/demos.jsonl").read_text().splitlines()
    filtered.write_text("".join(x + "\n" for x in demos if "<calc>" in x))
    _, filt_rows, t_filt = _run("sft_tool_only", [f"data.sft_path={filtered}", "train.steps=0"])
    filt = max(
        (
            (float(r["sft/step"]), float(r["eval/accuracy"]), float(r["eval/tool_rate"]))
            for r in _evals(filt_rows, "sft")
        ),
        key=lambda x: x[1],
    )
    sft_evals = [
        (float(r["sft/step"]), float(r["eval/accuracy"]), float(r["eval/tool_rate"]))
        for r in _evals(sft_rows, "sft")
    ]
    sft_evals += [
        (s + sft_evals[-1][0], a, tr)
        for s, a, tr in [
            (float(r["sft/step"]), float(r["eval/accuracy"]), float(r["eval/tool_rate"]))
            for r in _evals(more_rows, "sft")
        ]
    ]
    best = max(sft_evals, key=lambda x: x[1])
    last = lambda rows: _evals(rows, "rl")[-1]  # noqa: E731
    table = {
        "a_sft_only_best": {
            "accuracy": best[1],
            "tool_rate": best[2],
            "sft_steps": best[0],
            "sft_steps_total": sft_evals[-1][0],
            "wall_s": round(t_sft + t_more, 1),
        },
        "a2_sft_tool_only_demos_best": {
            "accuracy": filt[1],
            "tool_rate": filt[2],
            "sft_steps": filt[0],
            "demos": sum("<calc>" in x for x in demos),
            "wall_s": round(t_filt, 1),
        },
        "b_sft_rl_no_tools": {
            "accuracy": float(last(notool_rows)["eval/accuracy"]),
            "tool_rate": float(last(notool_rows)["eval/tool_rate"]),
            "wall_s": round(t_sft + t_notools, 1),
        },
        "c_sft_rl_tools": {
            "accuracy": float(last(tool_rows)["eval/accuracy"]),
            "tool_rate": float(last(tool_rows)["eval/tool_rate"]),
            "turns": float(last(tool_rows)["eval/turns"]),
            "wall_s": round(t_sft + t_tools, 1),
        },
        "rl_steps": int(last(tool_rows)["step"]),
        "sft_steps": int(_evals(sft_rows, "sft")[-1]["sft/step"]),
        "rl_seconds": round(rl_seconds, 1),
        "sft_only_evals": sft_evals,
        "heldout_prompts": 600,
        "load_avg_1min": round(os.getloadavg()[0], 1),
        "cpus": os.cpu_count(),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "llm_agentic.json").write_text(json.dumps(table, indent=2))
    _plot(sft_rows, more_rows, tool_rows, notool_rows, filt_rows)
    (OUT / "llm_agentic.md").write_text(_markdown(table))
    print(_markdown(table))


def _plot(
    sft_rows: list[dict[str, Any]],
    more_rows: list[dict[str, Any]],
    tool_rows: list[dict[str, Any]],
    notool_rows: list[dict[str, Any]],
    filt_rows: list[dict[str, Any]],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.2))
    s = _evals(sft_rows, "sft")
    end = float(s[-1]["elapsed_s"])
    m = _evals(more_rows, "sft")
    ax.plot(
        [float(r["elapsed_s"]) for r in s] + [end + float(r["elapsed_s"]) for r in m],
        [float(r["eval/accuracy"]) for r in s + m],
        "o-",
        label="(a) SFT only (continued)",
    )
    f = _evals(filt_rows, "sft")
    ax.plot(
        [float(r["elapsed_s"]) for r in f],
        [float(r["eval/accuracy"]) for r in f],
        "s-",
        label="(a') SFT on tool-using demos only",
    )
    for rows, label in (
        (notool_rows, "(b) SFT + RL, no tools"),
        (tool_rows, "(c) SFT + RL, calculator"),
    ):
        ev = _evals(rows, "rl")
        ax.plot(
            [end] + [end + float(r["elapsed_s"]) for r in ev],
            [float(s[-1]["eval/accuracy"])] + [float(r["eval/accuracy"]) for r in ev],
            ".-",
            label=label,
        )
    ax.axvline(end, color="gray", ls="--")
    ax.set(
        xlabel="wall-clock seconds (2 shared cores)",
        ylabel="held-out hard accuracy (greedy)",
        ylim=(-0.02, 1.02),
        title="held-out hard problems (no demonstrations exist)",
    )
    ax.legend(fontsize=8)
    tr = [r for r in tool_rows if r["phase"] == "rl"]
    bx.plot(
        [int(r["step"]) for r in tr],
        [float(r["rollout/tool_rate"]) for r in tr],
        ".-",
        label="(c) episodes with a call (train)",
    )
    bx.plot(
        [int(r["step"]) for r in tr],
        [float(r["rollout/turns"]) - 1 for r in tr],
        ".-",
        label="(c) turns per episode - 1",
    )
    ev = _evals(tool_rows, "rl")
    bx.plot(
        [int(r["step"]) for r in ev],
        [float(r["eval/tool_rate"]) for r in ev],
        "o--",
        label="(c) held-out call rate (greedy)",
    )
    nt = [r for r in notool_rows if r["phase"] == "rl"]
    bx.plot(
        [int(r["step"]) for r in nt],
        [float(r["rollout/tool_rate"]) for r in nt],
        ".-",
        alpha=0.6,
        label="(b) call attempts (never answered)",
    )
    bx.set(xlabel="RL step", ylim=(-0.02, 1.02), title="tool use over RL training")
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "llm_agentic.png", dpi=100)
    plt.close(fig)


def _markdown(t: dict[str, Any]) -> str:
    a, a2, b, c = (
        t["a_sft_only_best"],
        t["a2_sft_tool_only_demos_best"],
        t["b_sft_rl_no_tools"],
        t["c_sft_rl_tools"],
    )
    best_sft = max(a["accuracy"], a2["accuracy"])
    return "\n".join(
        [
            "# Agentic demo: SFT-only vs SFT + RL on held-out hard problems",
            "",
            f"`python benchmarks/llm_agentic.py` on {t['cpus']} shared cores (1-min load {t['load_avg_1min']} at the end); "
            f"{t['heldout_prompts']} held-out hard prompts (2-digit x 2-digit products), greedy decoding; demonstrations exist "
            "only for easy problems; RL prompts are hard train pairs with a math-verify reward on the final answer.",
            "",
            "| model | held-out hard accuracy | held-out tool-call rate | wall time (s) |",
            "|---|---|---|---|",
            f"| (a) SFT only, best of {int(a['sft_steps_total'])} SFT steps (best at step {int(a['sft_steps'])}, picked on the held-out set) "
            f"| {a['accuracy']:.3f} | {a['tool_rate']:.3f} | {a['wall_s']} |",
            f"| (a') SFT on the {a2['demos']} tool-using demonstrations only, best of {int(t['sft_steps'])} steps "
            f"| {a2['accuracy']:.3f} | {a2['tool_rate']:.3f} | {a2['wall_s']} |",
            f"| (b) SFT + RL without tools ({t['rl_steps']} RL steps) | {b['accuracy']:.3f} | {b['tool_rate']:.3f} (attempts; never answered) | {b['wall_s']} |",
            f"| (c) SFT + RL with the calculator ({t['rl_steps']} RL steps) | {c['accuracy']:.3f} | {c['tool_rate']:.3f} | {c['wall_s']} |",
            "",
            f"(c) - best SFT-only = {c['accuracy'] - best_sft:+.3f} absolute. RL phase of (c): {t['rl_seconds']} s; (a) got at least that much "
            "extra SFT time on the same demonstrations.",
            "",
            "Curves: `llm_agentic.png` (left: held-out accuracy vs wall time; right: tool-call rate and turns per episode over RL).",
            "",
            "What this shows: the demonstrations use the calculator on a random 30% of easy problems, so SFT imitates a 30% call "
            "rate and its greedy answer to a hard problem is a direct (wrong) guess (WHEN). Filtering the demonstrations to the "
            "tool-using ones (a') fixes the call rate, but every demonstrated result is below 1000, so SFT learns to write the "
            "answer's leading digit as 0 and only products below 1000 come out right (HOW to use a result it never saw). The "
            "outcome reward on hard problems teaches both. Without tools (b) no sampled answer to a hard problem is right, so "
            "every group's rewards are equal and GRPO has no gradient: the policy stays the SFT one. What it does not show: anything about real models or real tasks; the "
            "task is synthetic, the model has 0.1M parameters, and the gap is built into the data split on purpose.",
            "",
        ]
    )


if __name__ == "__main__":
    main()
