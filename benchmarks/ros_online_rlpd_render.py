"""The results of ``benchmarks/ros_online_rlpd.py``: the held-out success curve (``.png``)
and the ``results/<stem>.{json,md}`` write-up of a run (the learned reward's paragraph too).

Why it exists: rendering is a job of its own (``--from-json`` re-renders the results without a
run), apart from running the twin, learner and held-out evaluation in ``ros_online_rlpd.py``.
"""

from __future__ import annotations

from pathlib import Path

from bench_results import write_table
from ros_online_rlpd_corrections import corrections_lines


def plot(
    rows: list[dict],
    history: list[dict],
    path: Path,
    target: float,
    task: str = "reach",
    reward: str = "the twin's judge",
    single: dict | None = None,
    robots: int = 1,
) -> None:
    """The held-out curve (and the twin's training success, the classifier's error rates);
    a fleet run (``robots`` > 1) draws the single-robot run of ``single`` beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(
        [r["wall_s"] / 60 for r in rows],
        [r["heldout_success"] for r in rows],
        "o-",
        label="held-out success (sim, deterministic)"
        + (f", {robots} robots" if robots > 1 else ""),
    )
    if rows and "heldout_sampled" in rows[0]:
        ax.plot(
            [r["wall_s"] / 60 for r in rows],
            [r["heldout_sampled"] for r in rows],
            "s-",
            label="held-out success (sim, sampled actions)",
        )
    if single:
        ax.plot(
            [r["wall_s"] / 60 for r in single["rows"]],
            [r["heldout_success"] for r in single["rows"]],
            "^-",
            color="grey",
            label=f"held-out success, one robot ({single['date'][:10]})",
        )
    twin = [(h["time/wall_s"] / 60, h["success_rate"]) for h in history if "success_rate" in h]
    if twin:
        label = f"twin training episodes (last 100, by {reward})"
        ax.plot(*zip(*twin), ".--", alpha=0.6, label=label)
    for key, style in (("reward_judge/fp_rate", "x:"), ("reward_judge/fn_rate", "+:")):
        pts = [(h["time/wall_s"] / 60, h[key]) for h in history if h.get(key) is not None]
        if pts:
            ax.plot(
                *zip(*pts), style, alpha=0.7, label=f"classifier {key.split('/')[1]} (vs judge)"
            )
    ax.axhline(target, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("wall time since the robot started (min)")
    ax.set_ylabel("success rate (error rate)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(
        f"online RLPD over ROS 2 ({task}{f', {robots} robots' if robots > 1 else ''}): "
        "twin -> server -> streamer -> learner -> weights",
        fontsize=9,
    )
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def reward_lines(meta: dict) -> list[str]:
    """The learned reward's paragraph (none when the reward is the twin's judge)."""
    clf, fig = meta.get("classifier"), meta.get("run_figures") or {}
    if not clf:
        return []

    def f(key: str) -> str:
        v = fig.get(key)
        return "n/a" if v is None else f"{v:.3f}"

    share = fig.get("learner/transitions_trained_share")
    twin = meta.get("twin_success_last100")
    negatives = meta.get("negatives") or {}
    source = "the demos' front frames" + (
        f" and {negatives.get('episodes', 0)} episodes of the scripted human with noise "
        f"{negatives.get('noise')} on its commands ({negatives.get('successes', 0)} successes: "
        "the near misses are negatives), on the learner's frozen keypoint backbone"
        if negatives
        else ""
    )
    held = "".join(
        f", {name} {clf[key]:.3f}"
        for name, key in (
            ("val FP rate", "val_fp_rate"),
            ("val FN rate", "val_fn_rate"),
            ("failed val episodes called success", "val_false_success_episodes"),
        )
        if isinstance(clf.get(key), (int, float))
    )
    return [
        f"Reward: the success classifier (`{meta['classifier_config']}`, trained on {source} in "
        f"{clf.get('elapsed_s', clf.get('train_s', 0)):.0f} s, val accuracy "
        f"{clf.get('val_accuracy', float('nan')):.3f}{held}) served by `rlinf serve` to the reward "
        "node; the twin's success flag only judges it. Against the judge: FP rate "
        f"{f('reward_judge/fp_rate')}, FN rate {f('reward_judge/fn_rate')} (newest window), "
        f"{f('reward_judge/total_fp_rate')} / {f('reward_judge/total_fn_rate')} over the run "
        f"({fig.get('reward_judge/windows', 0):.0f} windows; an FN rate is n/a while the judge "
        "has said success on no frame). The twin's training episodes ended in success"
        + ("" if meta.get("corrections") else " by the classifier")
        + f" in {'n/a' if twin is None else f'{twin:.2f}'} of the last 100 ("
        + (
            "the classifier's, each one the operator confirmed, or the operator's success key; "
            "a rejected one paid nothing"
            if meta.get("corrections")
            else "its false positives are rewards the learner trusts"
        )
        + "). Streamed transitions that reached "
        f"a gradient: {'n/a' if share is None else f'{100 * share:.0f}%'}. Pixel encoder: "
        f"`{meta.get('encoder_weights') or 'none'}`.",
    ]


def human_lines(meta: dict) -> list[str]:
    """The watching human's paragraph (``--human``; none without one)."""
    patience = meta.get("human_patience_s")
    if patience is None:
        return []
    ratio = (meta.get("run_figures") or {}).get("ingest/intervention_ratio")
    return [
        "A scripted human watched the online run (HIL-SERL's operator: the teleop node in the "
        "twin graph, `teleop.device: scripted`, `always_intervene: false`) and took over when the "
        f"task had not progressed for {patience:g} s, handing back once it was done; its "
        "taken-over steps go to the demo source as well as the online one (`replay.interventions: "
        "demo`). Share of streamed steps the human drove: "
        f"{'n/a' if ratio is None else f'{ratio:.3f}'}. Held-out success is the policy alone."
    ]


def bc_lines(meta: dict) -> list[str]:
    """The learner's imitation term (``--bc-weight``; none without it)."""
    if not meta.get("bc_weight"):
        return []
    return [
        "The learner's actor also imitated the prior rows of each batch, the demos' and the "
        f"human's actions (`algorithm.bc_weight={meta['bc_weight']:g}`: that times the squared "
        "error of its deterministic action to theirs, added to SAC's actor loss)."
    ]


FLEET_LEVELS = (0.5, 0.7, 0.8)  # held-out success levels the fleet and one robot are timed to


def minutes_to(rows: list[dict], level: float) -> str:
    """Wall minutes of the first checkpoint at or above ``level`` held-out ('not reached')."""
    hit = next((r for r in rows if r["heldout_success"] >= level), None)
    return f"{hit['wall_s'] / 60:.1f} min" if hit else "not reached"


def fleet_lines(meta: dict, rows: list[dict]) -> list[str]:
    """A fleet run's paragraph: who streamed what, and the wall time to each success level
    beside the single-robot run of the same task (``meta['single']``), when there is one."""
    n = int(meta.get("robots", 1))
    if n <= 1:
        return []
    stored = meta.get("robots_stored") or {}
    total = sum(stored.values()) or 1
    per = ", ".join(f"{k} {v} ({100 * v / total:.0f}%)" for k, v in sorted(stored.items()))
    lines = [
        f"Fleet: {n} twin robots, each in a ROS domain of its own with its own task seed, stream "
        "to the one ingest and act through the one policy server the learner pushes to; stored "
        f"transitions per robot: {per or 'n/a'}."
    ]
    single = meta.get("single")
    if single:
        cells = "; ".join(
            f"{lv:.1f}: {minutes_to(single['rows'], lv)} with one robot, "
            f"{minutes_to(rows, lv)} with {n}"
            for lv in FLEET_LEVELS
        )
        last = single["rows"][-1]
        lines.append(
            f"Beside one robot (`results/{single['stem']}.md`, {single['date']}, 1-min load "
            f"{single['load']}): wall time to held-out success {cells}. In its "
            f"{single['minutes']:g} minutes the single robot streamed {last['transitions']} "
            f"transitions; the fleet streamed {meta['transitions'] or 0:.0f}."
        )
    return lines


def render(stem: str, meta: dict, rows: list[dict]) -> str:
    """Write ``results/<stem>.{json,md}`` from a run's meta and held-out rows; returns the
    verdict."""
    task = meta.get("task", "reach")
    env = meta.get("sim_task", f"mujoco_franka/{task}")  # the learner's env (+ obs mode)
    target, minutes = meta["target"], meta["minutes"]
    hit_s, best = meta.get("first_at_target_s"), meta["best"]
    hit = next((r for r in rows if hit_s is not None and r["wall_s"] == hit_s), None)
    verdict = f"held-out success {rows[0]['heldout_success']:.2f} (demos only) -> " + (
        f"{hit['heldout_success']:.2f} at {hit['wall_s'] / 60:.1f} min (target {target} met)"
        if hit
        else f"best {best['heldout_success']:.2f} at {best['wall_s'] / 60:.1f} min "
        f"(target {target} NOT met)"
    )
    if rows and "heldout_sampled" in rows[0]:
        hit_s, best_s = meta.get("first_at_target_sampled_s"), meta["best_sampled"]
        hit = next((r for r in rows if hit_s is not None and r["wall_s"] == hit_s), None)
        verdict += f"; sampled actions {rows[0]['heldout_sampled']:.2f} -> " + (
            f"{hit['heldout_sampled']:.2f} at {hit['wall_s'] / 60:.1f} min (target {target} met)"
            if hit
            else f"best {best_s['heldout_sampled']:.2f} at {best_s['wall_s'] / 60:.1f} min "
            f"(target {target} NOT met)"
        )
    intro = [
        f"`benchmarks/ros_online_rlpd.py`: {meta['demo_episodes']} scripted-teleop demos "
        "collected on "
        f"the twin with `rlinf collect`, then online RLPD (`{meta['learner']}`, {minutes:g} min) "
        + (f"with {meta['robots']} twin robots " if meta.get("robots", 1) > 1 else "")
        + "through robot node -> policy server -> streamer -> learner -> weights -> policy server, "
        "all "
        f"real processes over DDS on a {meta['cpus']}-core machine shared with other jobs (1-min "
        "load "
        f"{meta['load_1min_start']:.1f} at start, {meta['load_1min_end']:.1f} at end). One run "
        "(one "
        "seed).",
        f"Result: {verdict}. {meta['transitions'] or 0:.0f} transitions streamed, "
        f"{meta['updates'] or 0:.0f} updates, {meta['pushes'] or 0:.0f} weight pushes "
        f"({meta['push_failures'] or 0:.0f} failed); ingest duplicates "
        f"{meta['ingest_duplicates'] or 0:.0f}, gaps {meta['ingest_gaps'] or 0:.0f}.",
        f"Held-out = deterministic actor on the simulator of the same task ({env}, "
        f"{meta['eval_episodes']} episodes, seeds the twin never used), evaluated after the run"
        + (
            "; 'sampled' = the same episodes with the actor's sampled actions (seeded), the "
            "policy the twin ran (the server serves it with `server.deterministic=false`). "
            if rows and "heldout_sampled" in rows[0]
            else ". "
        )
        + f"Curve: `benchmarks/results/{stem}.png`. The twin curve's clock is the learner's (it "
        "starts "
        "before the robot: start-up, demo pretraining, the server); failed pushes are those sent "
        "before `rlinf serve` was up (the pusher retries).",
    ]
    intro += fleet_lines(meta, rows)
    intro += human_lines(meta) + bc_lines(meta)
    intro += reward_lines(meta)
    intro += corrections_lines(meta)
    intro += list(meta.get("notes", []))  # what a reader of the run noted (load, what it shows)
    cols = [
        ("checkpoint", lambda r: r["checkpoint"]),
        ("wall (min)", lambda r: f"{r['wall_s'] / 60:.1f}"),
        ("transitions", lambda r: r["transitions"]),
        ("updates", lambda r: r["updates"]),
        ("held-out success", lambda r: f"{r['heldout_success']:.2f}"),
    ]
    if rows and "heldout_sampled" in rows[0]:
        cols.append(("held-out, sampled", lambda r: f"{r['heldout_sampled']:.2f}"))
    write_table(stem, f"Online RLPD over ROS 2 on the sim twin ({task})", intro, meta, rows, cols)
    return verdict
