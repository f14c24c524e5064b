"""VLA OOD table: success per split (ID / vision / semantic / position) for SFT-only, SFT+PPO and
SFT+GRPO, for both action heads of the small VLA, on the language-conditioned Franka.

    .venv/bin/python benchmarks/vla_ood.py            # the table (2 shared CPU cores: tens of minutes)
    .venv/bin/python benchmarks/vla_ood.py --quick    # seconds: the pipeline only, numbers meaningless

The pipeline is the one a user runs (``rlinf collect`` -> ``runner: vla_sft`` -> ``runner:
embodied`` with ``train.init_from``), through the CLI, with the configs
``configs/sim_franka_language_vla_{tokens,flow}_{sft,ppo,grpo}.yaml`` plus the overrides below.
Writes ``benchmarks/results/vla_ood.{md,json}`` and ``vla_ood_curves.png`` (training success vs
wall time of every RL run, the SFT-only eval as a dashed line).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_results import RESULTS, machine_meta, write_table  # noqa: E402

SPLITS = ("id", "vision", "semantic", "position")
STAGES = ("sft", "ppo", "grpo")


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def _train(
    config: str, overrides: list[str]
) -> tuple[dict[str, Any], list[dict[str, Any]], float, str]:
    """One ``rlinf train`` run; (final metrics, history, wall seconds, 1-min load at the end)."""
    from rlinf_cli.main import main

    t0 = time.perf_counter()
    if main(["train", config, *overrides]) != 0:
        raise RuntimeError(f"rlinf train {config} {' '.join(overrides)} failed")
    out_dir = next(o.split("=", 1)[1] for o in overrides if o.startswith("train.out_dir="))
    data = json.loads((Path(out_dir) / "metrics.json").read_text())
    return data["final"], data["history"], time.perf_counter() - t0, _load()


def curve_of(history: list[dict[str, Any]], min_episodes: int = 20) -> list[tuple[float, float]]:
    """(wall s, training success over the last 100 episodes) once ``min_episodes`` have ended
    (the first few episodes to end are the quick successes: a rate over them says nothing)."""
    out, seen = [], 0.0
    for h in history:
        seen += h.get("iter/episodes", 0.0)
        if seen >= min_episodes and h.get("success_rate") is not None:
            out.append((h.get("time/wall_s", 0.0), h["success_rate"]))
    return out


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from rlinf_cli.main import main

    work = Path(args.work)
    demos = work / "demos"
    if not demos.exists():
        t0 = time.perf_counter()
        if (
            main(
                [
                    "collect",
                    "franka_language/mix",
                    "--episodes",
                    str(args.demos),
                    "--obs-mode",
                    "state+rgb",
                    "--noise",
                    "0.1",
                    "--out",
                    str(demos),
                    "cameras=[front]",
                    f"image_size={args.image_size}",
                ]
            )
            != 0
        ):
            raise RuntimeError("demo collection failed")
        print(f"collected {args.demos} demos in {time.perf_counter() - t0:.0f} s (load {_load()})")
    common = [
        f"env.kwargs.image_size={args.image_size}",
        "train.progress=false",
        f"eval.episodes={args.eval_episodes}",
        f"eval.num_envs={min(16, args.eval_episodes)}",
        f"eval.ood_splits=[{','.join(SPLITS)}]",
        f"model.kwargs.text_encoder={args.text_encoder}",
        *args.extra,
    ]
    rows = []
    for head in args.heads.split(","):
        cfg = f"configs/sim_franka_language_vla_{head}_%s.yaml"
        sft_dir = work / f"{head}_sft"
        runs = {
            "sft": (
                cfg % "sft",
                [f"sft.demos={demos}", f"sft.steps={args.sft_steps}", f"train.out_dir={sft_dir}"],
            ),
            "ppo": (
                cfg % "ppo",
                [
                    f"train.init_from={sft_dir}",
                    *_iterations(args.ppo_iters),
                    f"train.out_dir={work / f'{head}_ppo'}",
                ],
            ),
            "grpo": (
                cfg % "grpo",
                [
                    f"train.init_from={sft_dir}",
                    *_iterations(args.grpo_iters),
                    f"train.out_dir={work / f'{head}_grpo'}",
                ],
            ),
        }
        for stage in STAGES:
            if stage != "sft" and getattr(args, f"{stage}_iters") == 0:
                continue
            config, ov = runs[stage]
            run_dir = work / f"{head}_{stage}"
            done = run_dir / "metrics.json"
            if (
                args.reuse or (stage == "sft" and args.reuse_sft)
            ) and done.is_file():  # finished before: reuse
                data = json.loads(done.read_text())
                final, history = data["final"], data["history"]
                wall, load = final["elapsed_s"], "reused"
            else:
                final, history, wall, load = _train(
                    config, [*ov, *common, *([] if stage == "sft" else args.rl_extra)]
                )
            row = {
                "head": head,
                "stage": stage,
                "wall_s": round(wall, 1),
                "load_1min": load,
                "success": {s: final["eval"][s]["success_rate"] for s in SPLITS},
                "episodes": final["eval"]["id"]["episodes"],
                "iterations": final.get("iterations"),
                "curve": curve_of(history),
            }
            if args.id_episodes:
                row["id_large"] = {
                    "episodes": args.id_episodes,
                    "success": _eval_id(run_dir, args.id_episodes),
                }
            rows.append(row)
            print(
                f"{head:6s} {stage:4s} "
                + " ".join(f"{s} {row['success'][s]:.2f}" for s in SPLITS)
                + (
                    f" id({args.id_episodes}) {row['id_large']['success']:.3f}"
                    if args.id_episodes
                    else ""
                )
                + f"  wall {wall:.0f} s (load {load})",
                flush=True,
            )
    return rows


def _eval_id(run_dir: Path, episodes: int) -> float:
    """ID success of a finished run's checkpoint over ``episodes`` more held-out episodes (reused when a
    previous invocation evaluated it).

    Why: over the table's 192 episodes per split a rate's standard error is ~3 points, and a gain's
    ~4: one flow PPO checkpoint and its SFT read +11.5 on those 192 ID episodes and +14.0 on 960. The
    gain that the +15 target is judged on is the one with the smaller error bar; both are shown.
    """
    from rlinf_cli.main import main

    out = run_dir / f"eval_id{episodes}"
    if not (out / "results.json").is_file():
        argv = [
            "eval",
            str(run_dir),
            "env.name=franka_language/mix",
            "--episodes",
            str(episodes),
            "--ood",
            "id",
            "--no-video",
            "--out",
            str(out),
        ]
        if main(argv) != 0:
            raise RuntimeError(f"rlinf {' '.join(argv)} failed")
    return float(json.loads((out / "results.json").read_text())["success_rate"]["id"])


def _iterations(n: int | None) -> list[str]:
    """The override for an RL stage's budget; ``None`` keeps the config's own ``train.iterations``
    (each head's config carries the budget its recipe was measured with)."""
    return [] if n is None else [f"train.iterations={n}"]


def stderr(p: float, n: int) -> float:
    """Binomial standard error of a success rate over ``n`` episodes."""
    return math.sqrt(max(p * (1.0 - p), 0.0) / max(n, 1))


def verdict(rows: list[dict[str, Any]]) -> list[str]:
    """Did RL raise ID by >= 15 points over SFT-only without lowering an OOD split?

    A split counts as lowered when RL's rate is below SFT-only's by more than 1.96 standard errors
    of the difference (two binomial rates over ``episodes`` each): with 96 episodes a split's rate
    moves ~5 points from seed to seed, so a 2-point dip is noise, not forgetting.
    """
    out = []
    sft = {r["head"]: r for r in rows if r["stage"] == "sft"}
    for r in rows:
        if r["stage"] == "sft":
            continue
        base, n0, n1 = sft[r["head"]]["success"], sft[r["head"]]["episodes"], r["episodes"]
        se = {
            s: math.sqrt(stderr(base[s], n0) ** 2 + stderr(r["success"][s], n1) ** 2)
            for s in SPLITS
        }
        gain = 100 * (r["success"]["id"] - base["id"])
        lowered = [s for s in SPLITS[1:] if base[s] - r["success"][s] > 1.96 * se[s]]
        # one decimal: the target is gain >= 15, and a rounded "+15" that misses it reads as a contradiction
        id_text = f"ID {gain:+.1f} ± {100 * se['id']:.1f} points over SFT-only"
        big, big0 = r.get("id_large"), sft[r["head"]].get("id_large")
        if big and big0 and big["episodes"] == big0["episodes"]:  # judged on the larger ID sample
            n = big["episodes"]
            se_big = math.sqrt(stderr(big0["success"], n) ** 2 + stderr(big["success"], n) ** 2)
            id_text = (
                f"ID {100 * (big['success'] - big0['success']):+.1f} ± {100 * se_big:.1f} points over SFT-only "
                f"on {n} ID episodes ({gain:+.1f} on the table's {n1})"
            )
            gain = 100 * (big["success"] - big0["success"])
        ok = gain >= 15 and not lowered
        out.append(
            f"{r['head']} SFT+{r['stage'].upper()}: {id_text}; "
            + (
                f"significantly lower on {', '.join(lowered)}"
                if lowered
                else "no OOD split significantly lower"
            )
            + " (OOD deltas "
            + ", ".join(f"{s} {100 * (r['success'][s] - base[s]):+.0f}" for s in SPLITS[1:])
            + ")"
            + (" -- target met" if ok else " -- target MISSED")
        )
    return out


def write(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    meta = machine_meta(
        eval_episodes=args.eval_episodes,
        demos=args.demos,
        sft_steps=args.sft_steps,
        ppo_iters=args.ppo_iters,
        grpo_iters=args.grpo_iters,
        image_size=args.image_size,
        text_encoder=args.text_encoder,
        reward=args.reward,
        quick=args.quick,
        id_episodes=getattr(args, "id_episodes", 0),
        verdict=verdict(rows),
    )
    total = sum(r["wall_s"] for r in rows)
    intro = [
        "Small VLA (frozen MiniLM instruction embedding, FiLM CNN trained here, slot pointer, fusion MLP) on "
        "`franka_language/mix` (reach 0.6 / push 0.2 / lift 0.2 of the named object among two distractors, "
        f"{args.image_size} px front camera, state = proprioception + every object's position relative to the hand). "
        "SFT on oracle demos, then PPO / GRPO from the SFT checkpoint; success per OOD split on held-out seeds "
        f"({args.eval_episodes} episodes per split), deterministic actions. `benchmarks/vla_ood.py`.",
        "The slot pointer glimpses each object slot where it projects into the calibrated front camera "
        "(`model.kwargs.slot_camera`), which grounds colour-only instructions.",
        f"Recipe: {args.demos} oracle demos (noise 0.1), {args.sft_steps} SFT steps (batch 64); RL from the SFT "
        f"checkpoint with the {args.reward} reward: PPO (64 envs x 2,048 env steps per "
        "iteration: tokens 32 policy steps, flow 8 chunks of 4; the fresh critic at 10x the actor's learning rate, "
        "`actor.lr_scale`), GRPO (groups of 4, one episode each: tokens 64 envs, flow 128 envs, every episode "
        "weighed alike, `algorithm.agg_mode: seq-mean-token-mean`); iterations per run in the table "
        "(each config's `train.iterations` unless `--ppo-iters` / `--grpo-iters` override them); the flow head's "
        "RL samples start their denoising chain at the deterministic mode's x_0 = 0 (`model.kwargs.flow_x0: zero`); "
        "the flow head's RL runs train on `franka_language/hard` (reach 0.2 / push 0.4 / lift 0.4: SFT leaves its "
        "room on push and lift) and report on `mix` (`eval.env`); "
        "configs `configs/sim_franka_language_vla_*.yaml`.",
        f"Total wall time {total:.0f} s on {meta['cpus']} CPU cores shared with other work "
        "(1-min load average per run in the table; the demos' collection is not included; a table combined from "
        "several runs with `--combine` sums its rows, wherever they ran; 'reused' = a finished run re-tabulated "
        "by a later invocation (`--reuse-sft`, `--reuse`), its wall time from its own metrics).",
        "Verdict per RL run (ID gain ± its standard error, judged on the larger ID sample of the `id (N ep.)` "
        "column where both the run and its SFT have one; a split counts as lowered when the drop exceeds "
        "1.96 standard errors of the difference):",
        *[f"- {v}" for v in verdict(rows)],
        *EARLIER,
    ]
    cols = [
        ("head", lambda r: r["head"]),
        ("stage", lambda r: "SFT" if r["stage"] == "sft" else f"SFT+{r['stage'].upper()}"),
    ]
    cols += [
        (
            s,
            (
                lambda s: (
                    lambda r: (
                        f"{r['success'][s]:.2f} ± {stderr(r['success'][s], r['episodes']):.2f}"
                    )
                )
            )(s),
        )
        for s in SPLITS
    ]
    large = sorted({r["id_large"]["episodes"] for r in rows if r.get("id_large")})
    cols += [
        (
            f"id ({n} ep.)",
            (
                lambda n: (
                    lambda r: (
                        f"{r['id_large']['success']:.3f} ± "
                        f"{stderr(r['id_large']['success'], n):.3f}"
                        if r.get("id_large", {}).get("episodes") == n
                        else "-"
                    )
                )
            )(n),
        )
        for n in large
    ]
    cols += [
        ("RL iterations", lambda r: "-" if r["stage"] == "sft" else r.get("iterations") or "-"),
        ("wall s", lambda r: r["wall_s"]),
        ("load", lambda r: r["load_1min"]),
    ]
    stem = "vla_ood_quick" if args.quick else args.stem
    write_table(
        stem,
        "VLA OOD: success per split, SFT vs SFT+RL, both action heads",
        intro,
        meta,
        rows,
        cols,
    )
    _curves(rows, RESULTS / f"{stem}_curves.png")


SESSION6 = (
    "2026-11-24, per verb and instruction kind (`benchmarks/vla_grounding.py`, 192 ID episodes): the flow SFT "
    "checkpoint of the table before the slot glimpse (ID 0.60) reached the named object 0.91 of the time on "
    "colour-and-shape instructions but 0.30 on colour-only ones (chance 0.33): the slot pointer was right 1.00 on "
    "named and 0.38 on colour-only instructions, while confident (max weight 0.86) -- a pooled image feature did not "
    "say which slot is red. Spatial-softmax keypoint scores (0.44) and sampling the pointer's choice as a discrete "
    "action with its own log-prob under PPO / GRPO (pointer lr x5-20, up to 300 iterations: 0.38-0.48) did not fix "
    "it. What moved ID was the RL budget: 300 PPO iterations of 64 envs x 8 chunks (614k env steps, 677 s) took ID "
    "0.55 -> 0.65 / 0.71 / 0.66 at iterations 100 / 200 / 300 (named lift 0.24 -> 0.65, named push 0.77 -> 0.96). "
    "The table before the glimpse (200 PPO / 160 GRPO iterations, critic 10x lr): tokens SFT ID 0.39 -> PPO 0.63 "
    "(+24) / GRPO 0.48 (+10); flow SFT 0.58 -> PPO 0.69 (+11) / GRPO 0.66 (+8) -- the flow head sat at the ceiling "
    "colour-only instructions at chance allow."
)
SESSION7 = (
    "2026-11-25, the slot glimpse (`model.kwargs.slot_camera`: each slot projected into the calibrated front "
    "camera, the colour there scored against the instruction by a net shared by the slots), same demos and "
    "recipe, 192 ID episodes: flow SFT ID 0.58 -> 0.77, colour-only pointer 0.38 -> 0.98, colour-only reach "
    "0.30 -> 0.91; tokens SFT 0.39 -> 0.41 (its pointer is right on 0.98 named / 0.62 colour-only "
    "instructions, yet it reaches the named object only 0.36 of the time: the token head's execution, not "
    "grounding, limits it). After flow PPO (200 iterations) reach is solved (1.00 named / 0.98 colour-only), "
    "lift rises 0.24 -> 0.62 and push stays at 0.73-0.75: the remaining ID failures are pushes and lifts. "
    "Flow PPO on `franka_language/hard` (push and lift oversampled, `eval.env=franka_language/mix`), "
    "200 iterations: ID 0.84 (mix: 0.86), training success flat at ~0.55. Flow noise sigma 0.1 instead of 0.2 "
    "(`model.kwargs.init_log_sigma=-2.3` in SFT and PPO; finer exploration for the 4 cm push tolerance): PPO 200 "
    "iterations ID 0.78 (+1) -- finer noise does not help."
)

SESSION8 = (
    "2026-11-25 (later), same SFT checkpoints, 192 ID episodes: where a sampled flow chain starts. RL samples "
    "drew x_0 ~ N(0, I) while the deterministic eval starts from x_0 = 0; the sampled success (0.68-0.80) sat "
    "below the eval's, and what RL improved was largely the sampled policy's sensitivity to x_0, which the eval "
    "never sees. With `model.kwargs.flow_x0: zero` (exploration = the injected noise around the eval's chain): "
    "flow GRPO 160 iterations ID 0.77 -> 0.86 (+9) in a first run and 0.80 (+4) in the table's run of the same "
    "config (x_0 ~ N(0, I): +0), flow PPO 200 iterations 0.86 both times (bit-identical runs). The two GRPO runs "
    "diverged from iteration 2 because the table's ran after PPO in one process: MiniLM embedded the instructions "
    "it had not cached in padded batches, and a padded batch moves an embedding in the last bit (now one string at "
    "a time, `tests/test_vla_model.py`) -- so 0.80-0.86 is GRPO's spread from last-bit differences alone; sampled success "
    "now tracks the eval (PPO 0.77 -> 0.83 over the run). Longer runs with it: PPO 300 iterations 0.88 (+11), GRPO "
    "240 iterations 0.81 (+5). Flow GRPO on the `hard` mix at lr 1e-4 (x_0 ~ N(0, I)): 0.77. Tokens GRPO at lr "
    "2e-4 (approx KL per update 0.001 at 5e-5): 160 iterations ID 0.54 (+13), 240 iterations 0.52 (+11), with the "
    "same sampled-success curve as at 5e-5 -- within noise of the table's 0.50, so the config keeps 5e-5. In the "
    "table the flow rows ran two at a time, each process on its own core (load 2.0)."
)

SESSION9 = (
    "2026-11-25 (third), from this table's SFT checkpoints (flow 0.77, tokens 0.41), 192 episodes per split, "
    "each run on its own core: none reaches +15. Flow PPO: on the `hard` mix (push and lift oversampled, "
    "eval on `mix`) 0.88 (+11); 20 critic-only iterations first (`actor.critic_warmup_iters=20`, then 200) 0.86 "
    "(+9); twice the rollout per iteration (`rollout.steps_per_iteration=16`, 200 iterations) 0.87 (+10) -- flow "
    "PPO sits at 0.86-0.88 whatever the data mix, critic start or batch, with approx KL 0.02-0.03 and 15-20% of "
    "samples clipped in every update. Flow GRPO: dense reward 0.84 (+8); 128 envs (32 groups of 4) 0.84 (+7). "
    "Tokens GRPO: dense reward 0.48 (+7); groups of 8 0.46 (+5); 128 envs (32 groups of 4) 0.51 (+10). "
    "A weaker SFT does not give RL more room: flow SFT on the first 40 of the 150 demos 0.13 -> PPO 0.13 (+0), on "
    "80 demos 0.45 -> PPO 0.53 (+8)."
)

SESSION10 = (
    "2026-11-25 (fourth), from the same SFT checkpoints, 192 episodes per split, each run on its own core. Per "
    "verb (`env.name=franka_language/<verb>`, 192 ID episodes): flow SFT reach 0.96 / push 0.71 / lift 0.23; "
    "flow PPO 200 iterations on mix 0.97 / 0.73 / 0.59 -- its push failures were spread over the wrong object "
    "(7%), the wrong direction (6%) and short or near misses (11%), left / right pushes 0.6 against forward / "
    "backward 0.8, colour-only instructions 0.60 against 0.78 named; lift's were grasps that moved the object "
    "without lifting it (33%). The hard-mix training success was still rising at 200 iterations, so the run "
    "went on: flow PPO on `hard`, 600 iterations (1480 s) ID 0.93 (+17; reach 0.99 / push 0.89 / lift 0.73), "
    "now the config. Flow GRPO on `hard`, 480 iterations: 0.86 (+9; reach 0.97 / push 0.69 / lift 0.68 -- "
    "GRPO lifts lift as PPO does and leaves push where SFT had it); the same with the dense reward 0.86 (+9, "
    "position -9). Tokens GRPO on mix (its room is reach, 0.56 at SFT): 320 iterations 0.55 (+14), 480 "
    "iterations (3601 s) 0.63 (+22), now the config."
)


SESSION11 = (
    "2026-11-26, from the same SFT checkpoints, 192 episodes per split, each run on its own core. The embodied "
    "learner whitened GRPO's broadcast episode advantages over all steps of the batch; failures run to the time "
    "limit and successes end early, so the step-weighted mean shifted every advantage and an all-fail group (no "
    "signal) was reinforced. `algorithm.whiten_adv` now whitens GAE advantages only, as the LLM runners do "
    "(`tests/learner/runners/test_rollout_pieces.py`). Re-run with it: tokens GRPO 480 iterations 0.60 (+19, was "
    "0.63), flow GRPO 480 iterations on `hard` 0.87 (+10, was 0.86; reach 0.97 / push 0.76 / lift 0.66) -- the "
    "table's GRPO rows. Flow GRPO variants, none at +15: groups of 8 (8 initial states per iteration) 0.81, groups "
    "of 2 (32 states) 0.84, lr 1e-4 0.83, 720 iterations 0.86, Dr.GRPO (`algorithm.adv=dr_grpo`, no per-group std "
    "division) 0.89 (+12, within noise of 0.87). Training (sampled) success on `hard` ends at 0.68-0.71 after 480 "
    "iterations in every variant (lr 1e-4: 0.61; the 720-iteration run 0.72, with no eval gain), against flow "
    "PPO's 0.80 at 600: with one outcome per episode of ~22 chunks, GRPO's credit on push stays coarse where PPO's "
    "critic assigns it per chunk."
)


SESSION12 = (
    "2026-11-26, flow GRPO from the same SFT checkpoint (480 iterations on `hard`, 192 episodes per split, each run on "
    "its own core). New keys: `algorithm.agg_mode` now reaches the embodied learner (applied as per-step advantage "
    "weights, `learner/algorithms/aggregation.py::step_weights`; `seq-mean-token-mean` weighs every episode alike, "
    "GRPO's original aggregation: failures run to the time limit, so a step-mean gives them ~2x a success's weight), "
    "and outcome estimators score episodes by their return discounted by `algorithm.gamma` (was ignored). ID: "
    "seq-mean-token-mean 0.91 / 0.87 / 0.82 (seeds 0 / 1 / 2), + Dr.GRPO 0.88, + 2 minibatches 0.85, + 8 "
    "minibatches 0.86, + gamma 0.97 0.85, + Dr.GRPO and gamma 0.95 0.84. Training success on `hard` ends at "
    "0.67-0.70 in every variant, as before: the plateau is not in the loss weighting. The seed spread (0.82-0.91) is "
    "as wide as every variant gap measured in SESSION11 and here. The same checkpoints on 960 ID episodes (one "
    "larger sample, the table's 192 included): flow SFT 0.775, PPO 0.914 (+14 +/- 1.6), GRPO 0.868 (+9), GRPO "
    "seq-mean seed 0 0.881 (+11); tokens SFT 0.382, PPO 0.580 (+20), GRPO 0.554 (+17). The flow PPO row's +17 is "
    "+14 on the larger sample, at the threshold; tokens rows hold. The GRPO config is unchanged (token-mean)."
)

SESSION13 = (
    "2026-11-26 (later), flow GRPO from the same SFT checkpoint (480 iterations on `hard`, each run on its own core; "
    "ID on 192 episodes, then the same checkpoint on 960). Episodes are ~5.5 chunks long (22 env steps, at most 10 "
    "chunks). Step-level credit without a critic, `algorithm.shared_prefix` (`learner/rollout/branching.py`: a "
    "group's members replay their leader's first 0..k actions -- the simulator is deterministic, so they are in one "
    "state where they branch -- and the shared steps are masked, so the group mean scores the branch state): k 2 "
    "0.86, k 4 0.84 (fewer steps train), no gain. Where GRPO stops on push (48 ID states x 4 sampled episodes each, "
    "`franka_language/push`): SFT deterministic 0.75 / sampled 0.67 with 50% of groups mixed; GRPO 0.79 / 0.76 with "
    "23% mixed, sampled success 0.12 on the states its deterministic policy fails -- the remaining push failures are "
    "states where all four samples fail, an all-fail group has no advantage, so GRPO has no signal there; PPO "
    "(0.92 / 0.86, 25% mixed) reaches more of them through its critic. Lift is still mixed under GRPO (56-60%). "
    "More exploration noise on those states (`log_sigma` of the RL stage, which `train.init_from` used to overwrite "
    "with SFT's untrained value; `train.init_skip: [head.log_sigma]` now keeps `model.kwargs.init_log_sigma`): "
    "sigma 0.3 ID 0.90 (960: 0.878), sigma 0.4 0.90 (960: 0.892), sigma 0.6 0.90 (960: 0.888), sigma 0.4 + "
    "Dr.GRPO 0.89 (960: 0.873), sigma 0.4 + episode-mean (`agg_mode=seq-mean-token-mean`) 0.90 (960: 0.899), sigma "
    "0.4 seed 1 0.91 (960: 0.896), against sigma 0.2 0.87 (960: 0.868). Sigma 0.4 is 0.89-0.90 on 960 episodes in "
    "three runs, ~+3 over the config, and +12 over SFT's 0.775, not +15. The GRPO config is unchanged this session; "
    "next: sigma 0.4 in it (`train.init_skip`) and the table row re-run."
)

SESSION14 = (
    "2026-11-26 (fourth), flow GRPO from the same SFT checkpoint, 192 ID episodes then 960: the config now runs at "
    "sigma 0.4 (`model.kwargs.init_log_sigma: -0.9`, `train.init_skip: [head.log_sigma]`); this table's row is that "
    "config through this benchmark, ID 0.90 (960: 0.892, +12 over SFT's 0.775; bit-identical to the session-13 "
    "sigma 0.4 run), every OOD split up (vision 0.91, semantic 0.40, position 0.77 against 0.87 / 0.91 / 0.39 / "
    "0.73 at sigma 0.2). Re-running the start states whose whole group failed (`algorithm.revisit_share`, "
    "`learner/rollout/revisit.py`: up to that share of each iteration's groups reset from a queued all-fail seed, "
    "so the state gets another chance at the one success GRPO needs): share 0.25 ID 0.89 (960: 0.893), share 0.5 "
    "x4 re-runs 0.88 (960: 0.888; 6 of 16 groups were re-runs early, 2 late) -- no gain: the re-run groups fail "
    "again often enough that the extra signal does not move the deterministic policy. 4 epochs per batch: 0.84 "
    "(960: 0.864). 960 iterations, twice the wall time: seed 0 through this benchmark (`--grpo-iters 960`, 2951 s) "
    "ID 0.90 / vision 0.91 / semantic 0.36 / position 0.79 (960: 0.909), seed 1 (resumed from its 480-iteration "
    "checkpoint) 0.90 (960: 0.909) -- +13 over SFT on 960 episodes, ~+1.5 over 480 iterations, with training "
    "success flat at ~0.70 from iteration ~500; the config stays at 480."
)

SESSION15 = (
    "2026-11-26 (fifth), flow GRPO from the same SFT checkpoint (ID 0.766 on 192, 0.775 on 960 episodes), each run on "
    "its own core; ID on 192 episodes, then the same checkpoint on 960. Linear lr decay to 0 (`actor.anneal_lr`) "
    "from 1e-4 0.89, from 5e-5 0.89. A potential-based shaped reward (`env.kwargs.reward=shaped`: success + 0.3 x "
    "the step's change in the task's negative-distance score, so an episode's return is success plus how much "
    "closer it ended and an all-fail group still ranks its members): GRPO 0.87, Dr.GRPO 0.89. Twice the data per "
    "run with episode-mean aggregation (`algorithm.agg_mode=seq-mean-token-mean`): 960 iterations of 64 envs 0.91 "
    "(960: 0.918, +14.3), 480 iterations of 128 envs (32 groups of 4, 3067 s) 0.91 / vision 0.92 / semantic 0.42 / "
    "position 0.81 (960: 0.922, +14.7) -- the best flow GRPO on 960 episodes so far and above flow PPO's 0.914 "
    "there, now the config and this table's row: +14.6 on 192 episodes, one episode short of +15. With as many "
    "samples as flow PPO's 600 iterations (~300k chunks), GRPO matches it: the gap was data, not credit."
)
SESSION16 = (
    "2026-11-26 (sixth), the table re-run from a fresh clone. This table's SFT checkpoints were trained on "
    "2026-11-25 before instructions were embedded one string at a time, so the present code does not reproduce "
    "their bits: a fresh clone's flow SFT scores 0.79 on the table's 192 ID episodes (0.763 on 960) where this "
    "table's scored 0.77 (0.775), and tokens SFT 0.44 (0.392 on 960) where this table's scored 0.41 (0.382). From "
    "those fresh SFT checkpoints with the present configs (one process per head, each on its own core, beside a "
    "fresh-clone `make test`: load 3-4, walls ~2x): flow PPO 0.90 / vision 0.91 / semantic 0.38 / position 0.80 "
    "(+11.5 on 192; on 960 ID episodes 0.902, +14.0), tokens PPO 0.60 / 0.58 / 0.44 / 0.36 (+16.7; 960: 0.569, "
    "+17.7); no OOD split lower. On 960 episodes the flow PPO gain is the earlier checkpoints' (+13.9): RL adds ~+14 "
    "to the flow head from either SFT, and whether a 192-episode row shows +15 depends on how its SFT fared on "
    "those 192 seeds (the fresh flow SFT: 2.4 points above its 960-episode rate). The two GRPO re-runs were "
    "stopped unfinished after ~85 min (at that load each needs more) to leave the session time for its checks; the "
    "table's rows are unchanged."
)

SESSION17 = (
    "2026-11-26 (seventh): this table is now every row the present code reproduces, from the fresh-clone SFT "
    "checkpoints of SESSION16 (flow SFT ID 0.79 on these 192 episodes, 0.7625 on 960; tokens 0.44, 0.392), and the "
    "+15 verdict is judged on 960 ID episodes per checkpoint (`--id-episodes`, standard error of a gain ~1.6-2.2 "
    "points against ~3.5-4.7 on 192). Flow PPO at 900 iterations (now the config; its training success still "
    "climbs at 600, 0.81 -> 0.83 over the last 300): 960 ID 0.922, +15.9 (600 iterations gave 0.902, +14.0); flow "
    "GRPO with the unchanged config (480 iterations of 128 envs): 0.921, +15.8; both +13.5 on the 192 ID episodes, "
    "where this SFT scored 2.4 points above its 960-episode rate; no OOD split lower (vision +14 / +15, semantic "
    "+7 / +8, position +10 / +15). Tokens PPO (200 iterations, SESSION16's run): 0.569, +17.7. Flow PPO and GRPO "
    "ran at the same time, each on its own core, beside a fresh-clone `make test` for part of it (walls 4034 s and "
    "4842 s, ~1.6x the earlier table's at 600 iterations). Tokens GRPO was not re-run from the present SFT (~1 h "
    "on an idle core, ~2 h at this session's speed, which it did not have): its row came in SESSION18. The "
    "earlier table, whose SFT checkpoints predate embedding instructions one string at a time, is kept as "
    "`vla_ood_sft1125.md`: tokens SFT 0.41 / PPO 0.60 (+19.3) / GRPO 0.60 (+18.8; 960 ID episodes 0.382 / 0.58 / "
    "0.55), flow SFT 0.77 / PPO 0.93 (+16.7) / GRPO 0.91 (+14.6; 960: 0.775 / 0.914 / 0.922)."
)

SESSION18 = (
    "2026-11-26 (eighth): the tokens GRPO row re-run from SESSION16's fresh-clone tokens SFT checkpoint with the "
    "unchanged config (480 iterations of 64 envs, one process on its own core, 7041 s at load ~1.1): ID 0.56 on "
    "the 192 episodes (+12.0), 0.548 on 960 (+15.6 +/- 2.2 over SFT's 0.392); vision +18, semantic +20, position "
    "+20. Every RL row of this table now comes from the present code's SFT and meets +15 on 960 ID episodes: "
    "tokens PPO +17.7, tokens GRPO +15.6, flow PPO +15.9, flow GRPO +15.8 -- three of them within one standard "
    "error of the target, and on the 192-episode column they read +16.7 / +12.0 / +13.5 / +13.5."
)

EARLIER = (
    (
        "Earlier runs (48 episodes per split, no slot pointer; SFT 800 steps): tokens SFT ID 0.33 -> PPO 0.42 / GRPO "
        "0.38 (longer RL: 0.42 / 0.46), flow SFT 0.46 -> 0.46 / 0.48: the SFT policy reached toward the named object "
        "about as often as chance, so RL had little to sharpen (`vla_ood_long.md`). The slot pointer alone (same demos "
        "and steps) took SFT ID to 0.50 (tokens) and 0.65 (flow) on 48 episodes; checks from those SFT checkpoints "
        "(ID only, 48 episodes): flow PPO 0.73 (sparse, lr 2e-5), 0.73 (lr 5e-5), 0.69 (dense reward), GRPO 0.71; "
        "tokens PPO 0.50 (sparse), 0.42 (dense), GRPO 0.38; flow PPO 80 iterations 0.65 on 96 episodes. A shorter SFT (300 steps, 96 ID episodes) leaves no more room: flow "
        "0.47 -> PPO 60 iterations 0.51, tokens 0.35 -> PPO 0.34. Per verb "
        "(flow SFT, 96 ID episodes): reach 0.82, push 0.50, lift 0.05 -- lift (a fifth of the episodes) almost never "
        "succeeds, so a success-only reward cannot teach it, and reach is close to its ceiling."
    ),
    (
        "2026-11-23, from this table's SFT checkpoints (flow ID 0.60, tokens 0.42; eval on the standard `mix`, ID, "
        "96 episodes, ± 7 points): flow PPO on `franka_language/hard` (reach 0.2 / push 0.4 / lift 0.4, RL only) "
        "40 iterations 0.62 (sparse) / 0.65 (dense reward), 120 iterations lr 5e-5 0.62 / 0.65, 60 iterations lr 2e-4 (dense) 0.42 -- training success "
        "stays 0.3-0.5 on the hard mix, lift still out of reach; tokens PPO with `model.kwargs.token_temperature=0.3` "
        "(sampling entropy 6.0 -> 1.5 nats, same mode) 40 iterations 0.40, 80 iterations lr 1.5e-4 0.45; T 0.5 (2.6 nats), 80 iterations 0.35. "
        "None reaches +15; defaults unchanged."
    ),
    (
        "2026-11-24 (before the present recipe), flow head from the same SFT checkpoint (ID 0.60), 96 ID episodes each, 4x the RL batch (64 envs x "
        "8 chunks per iteration, 60-70 iterations, ~5 min): sparse lr 2e-5 0.67, dense 0.64; flow noise reset from "
        "sigma 0.2 to 0.5 (`log_sigma`: SFT never trains it and PPO at these rates does not move it) lr 2e-5 0.64, "
        "lr 5e-5 0.68, lr 1.2e-4 0.64; action head + critic only (encoder frozen) lr 3e-4 0.61. In every run the "
        "training (sampled) success stays flat at 0.55-0.60 from the first to the last iteration (approx KL 0.002-0.01 "
        "per update, clip fraction 1-6%), so the +4..+8 ID moves are within the ± 7-point noise. Where the signal is "
        "(8 sampled episodes from each of 48 ID initial states, flow SFT): reach-type instructions deterministic 0.88 / "
        "sampled 0.84 with 22% of states giving mixed outcomes; push 0.38 / 0.42 with 85% mixed -- RL has signal on "
        "push and does not convert it at this budget; lift 0.00 / 0.08. Next: per-episode advantage diagnostics on "
        "push, and an RL budget an order of magnitude larger."
    ),
    SESSION6,
    SESSION7,
    SESSION8,
    SESSION9,
    SESSION10,
    SESSION11,
    SESSION12,
    SESSION13,
    SESSION14,
    SESSION15,
    SESSION16,
    SESSION17,
    SESSION18,
)


def _curves(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heads = sorted({r["head"] for r in rows})
    fig, axes = plt.subplots(1, len(heads), figsize=(6 * len(heads), 4), squeeze=False)
    for ax, head in zip(axes[0], heads):
        for r in rows:
            if r["head"] != head:
                continue
            if r["stage"] == "sft":
                ax.axhline(r["success"]["id"], ls="--", color="grey", label="SFT-only (eval ID)")
            elif r["curve"]:
                t, s = zip(*r["curve"])
                ax.plot(t, s, marker=".", label=f"SFT+{r['stage'].upper()} (train, last 100 ep)")
                ax.scatter(
                    [t[-1]],
                    [r["success"]["id"]],
                    marker="*",
                    s=120,
                    label=f"SFT+{r['stage'].upper()} eval ID",
                )
        ax.set(
            title=f"vla_{head}",
            xlabel="wall time of the RL run (s)",
            ylabel="success rate",
            ylim=(0, 1),
        )
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--heads", default="tokens,flow")
    ap.add_argument("--demos", type=int, default=200, help="oracle demo episodes")
    ap.add_argument("--sft-steps", type=int, default=800)
    ap.add_argument(
        "--ppo-iters",
        type=int,
        default=None,
        help="PPO iterations (default: the config's; 0 skips PPO)",
    )
    ap.add_argument(
        "--grpo-iters",
        type=int,
        default=None,
        help="GRPO iterations (default: the config's; 0 skips GRPO)",
    )
    ap.add_argument("--eval-episodes", type=int, default=192)
    ap.add_argument(
        "--reward",
        default="sparse",
        choices=("dense", "sparse", "shaped"),
        help="RL reward (env.kwargs.reward)",
    )
    ap.add_argument(
        "--stem", default="vla_ood", help="results/<stem>.{md,json} and <stem>_curves.png"
    )
    ap.add_argument(
        "--combine",
        default="",
        help="with --from-json: comma-separated stems whose rows are merged "
        "(e.g. one run per head in parallel)",
    )
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--text-encoder", default="minilm")
    ap.add_argument(
        "--work", default="runs/bench_vla_ood", help="run directories (demos are reused if present)"
    )
    ap.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks the pipeline in seconds"
    )
    ap.add_argument(
        "--reuse-sft", action="store_true", help="reuse <work>/<head>_sft when it finished before"
    )
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="reuse every stage whose <work>/<head>_<stage> finished "
        "before (SFT and RL): re-tabulates finished runs, adding what is missing",
    )
    ap.add_argument(
        "--id-episodes",
        type=int,
        default=960,
        help="also evaluate each checkpoint on this many ID "
        "episodes; the +15 verdict uses them (0: only the table's --eval-episodes)",
    )
    ap.add_argument(
        "--from-json",
        action="store_true",
        help="only re-render results/vla_ood.{md,png} from its JSON",
    )
    ap.add_argument("extra", nargs="*", help="more overrides for every train run, key=value")
    args = ap.parse_args()
    args.rl_extra = [f"env.kwargs.reward={args.reward}"]
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
    if args.quick:
        args.demos, args.sft_steps, args.ppo_iters, args.grpo_iters, args.eval_episodes = (
            3,
            5,
            1,
            1,
            4,
        )
        args.id_episodes = min(args.id_episodes, 8)
        args.image_size, args.text_encoder, args.work = 32, "hash", args.work + "_quick"
        args.extra += ["env.num_envs=4", "env.max_episode_steps=8", "model.hidden=[32]"]
        args.rl_extra += ["rollout.steps_per_iteration=2", "algorithm.group_size=2"]
    if args.from_json:  # re-render the table and curves of the last full run
        parts = [
            json.loads((RESULTS / f"{st}.json").read_text())
            for st in (args.combine or args.stem).split(",")
        ]
        for (
            part
        ) in parts:  # rows written before per-row iterations: their run's budget from its meta
            for r in part["rows"]:
                if r["stage"] != "sft" and r.get("iterations") is None:
                    r["iterations"] = part["meta"].get(f"{r['stage']}_iters")
        data = parts[0]
        for key in (
            "demos",
            "sft_steps",
            "ppo_iters",
            "grpo_iters",
            "eval_episodes",
            "image_size",
            "text_encoder",
        ):
            setattr(args, key, data["meta"][key])
        args.reward = data["meta"].get("reward", "sparse")
        seen: set[tuple[str, str]] = (
            set()
        )  # a stage in two parts (an SFT reused by both): the first part's row
        rows = [
            r
            for part in parts
            for r in part["rows"]
            if (r["head"], r["stage"]) not in seen and not seen.add((r["head"], r["stage"]))
        ]
        order = {"tokens": 0, "flow": 1, "sft": 0, "ppo": 1, "grpo": 2}
        rows.sort(key=lambda r: (order.get(r["head"], 9), order.get(r["stage"], 9)))
        for r in rows:  # curves from the run directories when they are still there
            metrics = Path(args.work) / f"{r['head']}_{r['stage']}" / "metrics.json"
            if metrics.is_file() and r["stage"] != "sft":
                r["curve"] = curve_of(json.loads(metrics.read_text())["history"])
    else:
        rows = run(args)
    write(rows, args)
    print("\n".join(verdict(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
