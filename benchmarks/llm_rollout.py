"""LLM rollout benchmark: hf backend vs raw ``model.generate``; step-time breakdown per placement.

1. Same model, same prompts, same run: tokens/s of our hf backend (KV cache, per-token log-probs,
   left padding, EOS stop) vs ``transformers`` ``model.generate`` (sampling, no log-probs).
2. A few reasoning-runner steps per placement mode (inline / collocated / disaggregated worker
   groups) with the per-step time split into generate / reward / log-prob / train.

    .venv/bin/python benchmarks/llm_rollout.py [--quick]

Writes benchmarks/results/llm_rollout.json and .md. Timings on a shared machine are noisy:
each figure is the median of several repetitions, and the load average is recorded.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from learner.llm.arithmetic import ArithmeticConfig, arithmetic_split, tokenizer_corpus  # noqa: E402
from learner.llm.model import LLMModelConfig, build_model, count_parameters  # noqa: E402
from learner.llm.rollout import ROLLOUT_BACKENDS, SamplingParams  # noqa: E402
from learner.llm.rollout.hf import left_pad  # noqa: E402
from learner.llm.tokenizer import train_tokenizer  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_results import RESULTS as OUT  # noqa: E402
from bench_results import load, now_utc, provenance, run_command  # noqa: E402


def _interleaved(fns: list, reps: int) -> list[tuple[float, int]]:
    """Median seconds and last token count of each fn, alternating them every repetition so a
    load spike from other jobs on the machine hits both sides alike."""
    times: list[list[float]] = [[] for _ in fns]
    toks = [0] * len(fns)
    for _ in range(reps):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            toks[i] = fn()
            times[i].append(time.perf_counter() - t0)
    return [(statistics.median(t), n) for t, n in zip(times, toks)]


def bench_generate(
    model_cfg: LLMModelConfig, n_prompts: int, n: int, max_new: int, reps: int
) -> dict:
    tok = train_tokenizer(tokenizer_corpus(ArithmeticConfig()))
    model = build_model(model_cfg, tok).eval()
    prompts = [e.prompt for e in arithmetic_split(ArithmeticConfig())[0][:n_prompts]]
    backend = ROLLOUT_BACKENDS.get("hf")(model, tok)
    params = SamplingParams(n=n, temperature=1.0, max_new_tokens=max_new, seed=0)

    def ours() -> int:
        return backend.generate(prompts, params).num_tokens

    ids, mask = left_pad(
        [tok(p, add_special_tokens=False).input_ids for p in prompts], tok.pad_token_id
    )

    @torch.no_grad()
    def raw() -> int:
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            max_new_tokens=max_new,
            num_return_sequences=n,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
        new = out[:, ids.shape[1] :]
        # count tokens up to and including EOS, like the backend does
        is_eos = (new == tok.eos_token_id).int()
        after = (is_eos.cumsum(1) - is_eos) > 0
        return int((~after).sum())

    ours(), raw()  # warm-up
    (t_ours, n_ours), (t_raw, n_raw) = _interleaved([ours, raw], reps)
    return {
        "params_M": round(count_parameters(model) / 1e6, 3),
        "prompts": n_prompts,
        "samples_per_prompt": n,
        "max_new_tokens": max_new,
        "hf_backend_tokens_per_s": round(n_ours / t_ours, 1),
        "hf_backend_tokens": n_ours,
        "raw_generate_tokens_per_s": round(n_raw / t_raw, 1),
        "raw_generate_tokens": n_raw,
        "ratio_backend_over_raw": round((n_ours / t_ours) / (n_raw / t_raw), 3),
    }


def bench_steps(steps: int) -> list[dict]:
    from learner.cluster import Cluster
    from learner.runners.reasoning import ReasoningConfig, run
    from rlinf_contracts.config import from_dict, load_config

    layouts = [
        ("inline", "inline", {"rollout,reward,actor": "0"}),
        ("collocated", "workers", {"rollout,reward": "0-1", "actor": "0:0-1"}),
        ("disaggregated", "workers", {"rollout": "0", "reward,actor": "1"}),
    ]
    cluster = Cluster.local(num_cpus=2)
    rows = []
    try:
        for name, driver, placement in layouts:
            with tempfile.TemporaryDirectory() as tmp:
                raw = load_config(
                    ROOT / "configs/llm_grpo_arith.yaml",
                    [
                        "sft.steps=20",
                        f"train.steps={steps}",
                        "train.eval_every=0",
                        f"train.driver={driver}",
                        f"train.out_dir={tmp}",
                        "train.save_checkpoint=false",
                        "data.eval_limit=32",
                    ],
                )
                raw["placement"] = placement
                cfg = from_dict(ReasoningConfig, raw)
                t0 = time.perf_counter()
                result = run(cfg, cluster)
                wall = time.perf_counter() - t0
                import csv

                with open(result["csv"]) as f:
                    rl = [r for r in csv.DictReader(f) if r["phase"] == "rl"]
                rl = rl[1:]  # drop the warm-up step
            el = [float(r["elapsed_s"]) for r in rl]
            step_s = (
                statistics.median([b - a for a, b in zip(el, el[1:])])
                if len(el) > 1
                else float("nan")
            )

            def med(k: str, rl: list[dict] = rl) -> float:
                return round(statistics.median(float(r[k]) for r in rl), 4)

            rows.append(
                {
                    "mode": name,
                    "placement": placement,
                    "driver": driver,
                    "step_s": round(step_s, 3),
                    "generate_s": med("time/generate"),
                    "reward_s": med("time/reward"),
                    "logprob_s": med("time/logprob"),
                    "train_s": med("time/train"),
                    "run_wall_s": round(wall, 1),
                    "steps": steps,
                }
            )
    finally:
        cluster.shutdown()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repetitions / steps")
    ap.add_argument(
        "--from-json",
        action="store_true",
        help="only re-render results/llm_rollout.md from its JSON",
    )
    args = ap.parse_args()
    if args.from_json:
        render(load("llm_rollout"))
        return
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(1)
    reps = 2 if args.quick else 5
    demo = LLMModelConfig(
        hidden_size=64, num_layers=2, num_heads=4, intermediate_size=192, max_position=64
    )
    larger = LLMModelConfig(
        hidden_size=256, num_layers=4, num_heads=8, intermediate_size=768, max_position=64
    )
    gen = [bench_generate(demo, 64, 8, 16, reps), bench_generate(larger, 32, 8, 16, reps)]
    for g in gen:
        print(
            f"generate {g['params_M']}M params: hf backend {g['hf_backend_tokens_per_s']} tok/s, "
            f"model.generate {g['raw_generate_tokens_per_s']} tok/s (ratio "
            f"{g['ratio_backend_over_raw']})"
        )
    steps = bench_steps(4 if args.quick else 8)
    for s in steps:
        print(
            f"step {s['mode']:>13}: {s['step_s']} s/step (generate {s['generate_s']}, reward "
            f"{s['reward_s']}, "
            f"logprob {s['logprob_s']}, train {s['train_s']})"
        )
    result = {
        "command": run_command(),
        "date": now_utc(),
        "machine": platform.machine(),
        "generate": gen,
        "steps": steps,
        "load_avg_1m": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "llm_rollout.json").write_text(json.dumps(result, indent=2))
    render(result)
    print(f"wrote {OUT / 'llm_rollout.json'} and .md")


def render(result: dict) -> None:
    """``results/llm_rollout.md`` from the run's JSON."""
    gen, steps = result["generate"], result["steps"]
    md = ["# LLM rollout benchmark", ""]
    for line in provenance(result):
        md += [line, ""]
    md += [
        f"1-min load average at the end: "
        f"{result['load_avg_1m']:.1f} (machine shared with other jobs; figures are medians).",
        "",
        "## hf backend vs model.generate (same model, same prompts, same run)",
        "",
        "| params (M) | prompts x n | max new | hf backend tok/s | model.generate tok/s | ratio |",
        "|---|---|---|---|---|---|",
    ]
    md += [
        f"| {g['params_M']} | {g['prompts']} x {g['samples_per_prompt']} | {g['max_new_tokens']} | "
        f"{g['hf_backend_tokens_per_s']} | {g['raw_generate_tokens_per_s']} | "
        f"{g['ratio_backend_over_raw']} |"
        for g in gen
    ]
    md += [
        "",
        "## Step time per placement (tiny demo model, 64 prompts x 8 samples)",
        "",
        "| mode | placement | s/step | generate | reward | log-prob | train |",
        "|---|---|---|---|---|---|---|",
    ]
    md += [
        f"| {s['mode']} | `{s['placement']}` | {s['step_s']} | {s['generate_s']} | "
        f"{s['reward_s']} | "
        f"{s['logprob_s']} | {s['train_s']} |"
        for s in steps
    ]
    md += [
        "",
        "Component times are seconds spent inside each phase per step (summed over micro-batches);",
        "in the disaggregated layout generation of step s+1 overlaps training of step s, so s/step",
        "can be below the sum of the phases.",
    ]
    (OUT / "llm_rollout.md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
